"""Pass-rate curation: which train tasks the starting policy solves always, never, or sometimes.

`k` train-mode rollouts of every task (the policy's own sampling) give each task a pass count. A
task solved every time, or never, makes GRPO groups whose rewards agree: nothing to learn from it
until the policy changes. The mixed ones (solved sometimes) are kept. When no task is mixed the
curation says so and keeps every task rather than an empty set. A pass is a rollout that finished
(`succeeded`) with a primary reward of at least the success threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from algorithm import Evaluate, RolloutOutcome, Task
from lightningstore import LightningStore, RolloutConfig, RolloutMode

KINDS = ("always", "never", "mixed")


@dataclass(frozen=True)
class TaskPasses:
    """One task's passes out of its tries."""

    task: Task
    passes: int
    tries: int

    def __post_init__(self) -> None:
        if not 0 <= self.passes <= self.tries or self.tries < 1:
            raise ValueError(
                f"task {self.task.task_id!r}: passes must be in [0, tries] and tries >= 1, "
                f"got passes={self.passes!r}, tries={self.tries!r}"
            )

    @property
    def kind(self) -> str:
        """Always (solved every try), never, or mixed."""
        if self.passes == self.tries:
            return "always"
        return "never" if self.passes == 0 else "mixed"

    @property
    def rate(self) -> float:
        return self.passes / self.tries


@dataclass(frozen=True)
class SliceRow:
    """One row of the pass-rate table."""

    slice: str
    tasks: int
    always: int
    never: int
    mixed: int
    mean_pass_rate: float


@dataclass(frozen=True)
class Curation:
    """Every task's pass count, and which tasks to keep (the mixed ones; all when none is)."""

    passes: tuple[TaskPasses, ...]
    slice_by: str | None = None
    """The tag the table's rows are by (`balance_by`); None: one row for all tasks."""

    def of_kind(self, kind: str) -> list[Task]:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        return [p.task for p in self.passes if p.kind == kind]

    @property
    def kept_all(self) -> bool:
        """No task is mixed: every task is kept (an empty train set would train nothing)."""
        return not self.of_kind("mixed")

    @property
    def kept(self) -> list[Task]:
        return [p.task for p in self.passes] if self.kept_all else self.of_kind("mixed")

    def rows(self) -> list[SliceRow]:
        """A row per value of `slice_by` (sorted), then "all"; only "all" without `slice_by`."""
        names = sorted({self._slice(p.task) for p in self.passes}) if self.slice_by else []
        rows = [self._row(name, [p for p in self.passes if self._slice(p.task) == name]) for name in names]
        return [*rows, self._row("all", list(self.passes))]

    def table(self) -> str:
        """The pass-rate table as aligned text."""
        header = ("slice", "tasks", "always solved", "never solved", "mixed", "mean pass rate")
        cells = [header] + [
            (r.slice, str(r.tasks), str(r.always), str(r.never), str(r.mixed), f"{r.mean_pass_rate:.3f}")
            for r in self.rows()
        ]
        widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
        return "\n".join(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
            for row in cells
        )

    def summary(self) -> str:
        """One line: how many tasks are kept and how many were always / never solved."""
        always, never, total = len(self.of_kind("always")), len(self.of_kind("never")), len(self.passes)
        counts = f"{always} always solved, {never} never solved"
        if self.kept_all:
            return f"no task is mixed ({counts}): keeping all {total} tasks"
        return f"kept {len(self.kept)} of {total} tasks (solved sometimes); dropped {counts}"

    def _slice(self, task: Task) -> str:
        return f"{self.slice_by}={task.tags.get(self.slice_by, '')}" if self.slice_by else "all"

    @staticmethod
    def _row(name: str, passes: list[TaskPasses]) -> SliceRow:
        kinds = [p.kind for p in passes]
        mean = sum(p.rate for p in passes) / len(passes) if passes else 0.0
        return SliceRow(name, len(passes), *(kinds.count(k) for k in KINDS), mean_pass_rate=mean)


def pass_counts(outcomes: Sequence[RolloutOutcome], threshold: float) -> list[TaskPasses]:
    """Each task's passes out of its rollouts, in the order its tasks first appear."""
    tries: dict[str, list[bool]] = {}
    tasks: dict[str, Task] = {}
    for o in outcomes:
        tasks.setdefault(o.task.task_id, o.task)
        tries.setdefault(o.task.task_id, []).append(o.succeeded and (o.reward or 0.0) >= threshold)
    return [TaskPasses(tasks[i], sum(hits), len(hits)) for i, hits in tries.items()]


async def probe(
    store: LightningStore,
    tasks: Sequence[Task],
    *,
    k: int,
    resources_id: str | None,
    success_threshold: float,
    timeout: float,
    slice_by: str | None = None,
    rollout_config: RolloutConfig | None = None,
) -> Curation:
    """`k` train-mode rollouts of every task on `resources_id` (groups `probe/<task>`), curated."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"probe k must be an integer >= 1, got {k!r}")
    result = await Evaluate(
        store,
        tasks,
        resources_id=resources_id,
        n=k,
        mode=RolloutMode.TRAIN,
        timeout=timeout,
        success_threshold=success_threshold,
        rollout_config=rollout_config,
        group_prefix="probe/",
    ).run()
    return Curation(tuple(pass_counts(result.outcomes, success_threshold)), slice_by=slice_by)
