"""Evaluation: an agent x a model x rows -> success per slice with 95% intervals, pass@k, a JSON report.

`lightningrl eval` and `lightningrl.evaluate` start what `fit` starts (store server with its proxy, an
inference server on the checkpoint, runner processes) and run `eval_stage`: k rollouts per row in the
validation mode through `algorithm.Evaluate`, the same call `fit`'s validation makes, so both give
the same number on the same model, rows and sampling. The rollouts and their spans stay in the store
(the dashboard opens it); the report is printed and written to `eval.json` in the output directory.

Intervals are Wilson score intervals over the rollouts (with k > 1 a task's rollouts are correlated:
read them as a lower bound on the uncertainty). pass@j is the unbiased estimator of Chen et al. 2021,
1 - C(k-c, j) / C(k, j) per task with c of its k rollouts successful, averaged over tasks.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from algorithm import Evaluate, RolloutOutcome, Task
from lightningstore import LightningStore, RolloutConfig

REPORT_FILE = "eval.json"


@dataclass(frozen=True)
class ServedModel:
    """A model served elsewhere behind an OpenAI-compatible API (a hosted vendor, a vLLM you run): it can
    be evaluated through the proxy (every call recorded as a span), never trained. `fit(model=...)` with
    `algorithm=[]` and `evaluate=k`, or `evaluate(..., model=ServedModel(...))`."""

    base_url: str
    """The endpoint's `.../v1` base URL."""
    model: str
    """The model name the endpoint serves."""
    api_key_env: str | None = None
    """The environment variable holding the endpoint's API key (e.g. "OPENAI_API_KEY"): the gateway sends
    it upstream; runners never inherit it, so the agent under evaluation cannot read it."""


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a success rate (95% for z = 1.96); (0, 1) for n = 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_at(n: int, c: int, j: int) -> float:
    """Unbiased pass@j of one task with c successes among n samples (Chen et al. 2021)."""
    if n - c < j:
        return 1.0
    return 1.0 - math.comb(n - c, j) / math.comb(n, j)


@dataclass(frozen=True)
class Score:
    """Success over rollouts, with its 95% interval."""

    tasks: int
    rollouts: int
    successes: int
    success: float
    low: float
    high: float

    @classmethod
    def of(cls, tasks: int, hits: Sequence[bool]) -> Score:
        successes = sum(hits)
        low, high = wilson_interval(successes, len(hits))
        return cls(tasks, len(hits), successes, successes / len(hits) if hits else 0.0, low, high)


@dataclass(frozen=True)
class EvalReport:
    version_id: str
    resources_id: str
    mode: str
    k: int
    overall: Score
    mean_reward: float
    pass_at_k: dict[int, float]
    """pass@j for j = 1 .. k (pass@1 equals the overall success rate)."""
    slices: dict[str, Score] = field(default_factory=dict)
    """Per task-tag value (e.g. "op=plus")."""
    failed_rollouts: int = 0
    """Rollouts that ended failed or timed out (they count as not successful)."""
    source: dict[str, Any] = field(default_factory=dict)
    """What was evaluated, when not a checkpoint given as is: a store's version (`store`, `version_id`,
    `pointer`) or a model served elsewhere (`base_url`, `model`)."""

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["pass_at_k"] = {str(j): v for j, v in self.pass_at_k.items()}
        return data

    def table(self) -> str:
        """The report in a few aligned lines."""

        def line(name: str, s: Score) -> str:
            return (
                f"{name:<24} {s.success:6.3f}  [{s.low:.3f}, {s.high:.3f}]  "
                f"{s.successes}/{s.rollouts} rollouts, {s.tasks} tasks"
            )

        rows = [f"{'slice':<24} {'success':>7}  95% interval", line("all", self.overall)]
        rows += [line(name, score) for name, score in sorted(self.slices.items())]
        passes = "  ".join(f"pass@{j} {v:.3f}" for j, v in self.pass_at_k.items())
        rows.append(f"{passes}  (k={self.k}, mode {self.mode}, version {self.version_id})")
        return "\n".join(rows)


def eval_report(
    outcomes: Sequence[RolloutOutcome],
    *,
    k: int,
    success_threshold: float,
    version_id: str,
    resources_id: str,
    mode: str,
) -> EvalReport:
    """The report of `outcomes` (k rollouts of each task)."""

    def hit(outcome: RolloutOutcome) -> bool:
        return (outcome.reward or 0.0) >= success_threshold

    by_task: dict[str, list[bool]] = defaultdict(list)
    tasks: dict[str, Task] = {}
    for outcome in outcomes:
        by_task[outcome.task.task_id].append(hit(outcome))
        tasks[outcome.task.task_id] = outcome.task
    by_slice: dict[str, list[bool]] = defaultdict(list)
    slice_tasks: dict[str, set[str]] = defaultdict(set)
    for outcome in outcomes:
        for key, value in outcome.task.tags.items():
            by_slice[f"{key}={value}"].append(hit(outcome))
            slice_tasks[f"{key}={value}"].add(outcome.task.task_id)
    passes = {
        j: sum(pass_at(len(h), sum(h), j) for h in by_task.values()) / max(1, len(by_task))
        for j in range(1, k + 1)
    }
    return EvalReport(
        version_id=version_id,
        resources_id=resources_id,
        mode=mode,
        k=k,
        overall=Score.of(len(by_task), [hit(o) for o in outcomes]),
        mean_reward=sum(o.reward or 0.0 for o in outcomes) / max(1, len(outcomes)),
        pass_at_k=passes,
        slices={name: Score.of(len(slice_tasks[name]), hits) for name, hits in by_slice.items()},
        failed_rollouts=sum(1 for o in outcomes if not o.succeeded),
    )


async def eval_stage(
    store: LightningStore,
    tasks: list[Task],
    k: int,
    *,
    resource_name: str,
    prompt_name: str,
    mode: str,
    success_threshold: float,
    timeout: float,
    output_dir: Path,
    rollout_config: RolloutConfig,
    console: Console,
    watched: Callable[[Awaitable[Any]], Awaitable[Any]],
) -> EvalReport:
    """k rollouts of every task in `mode` by the resource's latest version (the latest prompt bound, as
    fit's validation binds it); prints the report and writes it to `output_dir/eval.json`."""
    version = await store.get_latest_version(resource_name)
    assert version is not None
    bound = {resource_name: version.version_id}
    prompt = await store.get_latest_version(prompt_name)
    if prompt is not None:
        bound[prompt_name] = prompt.version_id
    resources = await store.add_resource_set(bound)
    result = await watched(
        Evaluate(
            store, tasks, resources_id=resources.resources_id, n=k, mode=mode, timeout=timeout,
            success_threshold=success_threshold, rollout_config=rollout_config, group_prefix="eval/",
        ).run()
    )  # fmt: skip
    report = eval_report(
        result.outcomes,
        k=k,
        success_threshold=success_threshold,
        version_id=version.version_id,
        resources_id=resources.resources_id,
        mode=mode,
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / REPORT_FILE).write_text(json.dumps(report.as_json(), indent=2) + "\n")
    console.print(report.table(), markup=False, highlight=False, soft_wrap=True)
    return report
