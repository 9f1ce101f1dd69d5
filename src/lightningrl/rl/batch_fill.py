"""Dynamic sampling (DAPO; verl's `filter_groups`): every update trains on groups that carry a signal.

A group (one task's rollouts in one round) is *informative* when its rollouts' rewards disagree. What
is compared is what the update learns from: each succeeded rollout's selected rewards (the primary
ones, or `reward_name`'s), as the sum of its episode rewards and the sorted values of its step
rewards. A failed rollout is never trained on (credit assignment drops crashed attempts), so it
counts as no signal at all, not as reward 0: a group needs two succeeded rollouts that differ.

After a step's first round, the groups that agree are replaced by groups of fresh tasks (drawn from
the same slice when `balance_by` is set), one extra round at a time, until the step has `per_slice`
informative groups of every slice (`tasks_per_step` in all) or `max_fill_rounds` extra rounds ran.
A task drawn twice in one round (a slice with fewer tasks than its share of a step) is one group
of both draws' rollouts, counted as two groups. The update then trains on every informative group,
padded with the earliest uninformative ones up to `tasks_per_step` groups when the rounds ran out:
advantages drop those (their rewards agree), but their tokens keep the loss's scale
(`AdvantageConfig.scale_to_batch`), so a batch with few informative groups still takes a
proportionally smaller step.

Slices that rarely succeed get larger groups: a running success rate per slice (over every train
rollout of `run`, exponentially weighted) below 1/`rollouts_per_task` means fewer than one success
per group is expected, so most groups would agree on failure; such a slice's groups get
`hard_slice_factor` times `rollouts_per_task` rollouts until its rate recovers. Only once one of
its groups has agreed on failure: a graded reward whose rollouts differ is informative whatever its
success threshold, and needs no larger groups.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from algorithm import RolloutOutcome, Task
from lightningrl.rl.task_draw import TaskDraw

RATE_DECAY = 0.7
"""Weight of a slice's running success rate against one round's rate (half-life ~2 rounds)."""
_DIGITS = 9  # rewards equal to 1e-9 agree (advantages' `uniform_tolerance`)

Signal = tuple[float, tuple[float, ...]]


def rollout_signal(outcome: RolloutOutcome, reward_name: str | None = None) -> Signal | None:
    """(episode reward sum, sorted step reward values) of the selected rewards; None for a rollout
    that did not succeed (never trained on)."""
    if not outcome.succeeded:
        return None
    chosen = [r for r in outcome.rewards if (r.primary if reward_name is None else r.name == reward_name)]
    episode = round(sum(r.value for r in chosen if r.judges_episode), _DIGITS)
    steps = tuple(sorted(round(r.value, _DIGITS) for r in chosen if not r.judges_episode))
    return episode, steps


def is_informative(outcomes: Sequence[RolloutOutcome], reward_name: str | None = None) -> bool:
    """True when at least two succeeded rollouts of the group differ in their rewards."""
    signals = {rollout_signal(o, reward_name) for o in outcomes}
    signals.discard(None)
    return len(signals) > 1


def group_key(outcome: RolloutOutcome) -> str:
    return outcome.rollout.group_id or outcome.rollout.rollout_id


@dataclass
class SliceRates:
    """A running success rate per slice: each round's rate weighted in by `1 - decay`."""

    decay: float = RATE_DECAY
    rates: dict[str, float] = field(default_factory=dict)
    agreed_on_failure: set[str] = field(default_factory=set)
    """Slices one of whose groups agreed on failure (no success, rewards all equal) in this run."""

    def observe(self, name: str, successes: int, rollouts: int) -> None:
        if rollouts < 1:
            return
        rate = successes / rollouts
        old = self.rates.get(name)
        self.rates[name] = rate if old is None else self.decay * old + (1.0 - self.decay) * rate


@dataclass
class Group:
    """One task's rollouts in one round (a task drawn twice in a round is one group of both draws)."""

    slice: str
    round: int
    outcomes: list[RolloutOutcome]
    draws: int = 1
    """How many of the step's groups it stands for: its draws of the task (2 for a task drawn twice)."""
    informative: bool = False


@dataclass
class BatchFill:
    """The run's dynamic sampling: group sizes by slice, and a `StepFill` for each step."""

    draw: TaskDraw
    rollouts_per_task: int
    max_fill_rounds: int = 2
    """Extra rounds a step may roll out to replace uninformative groups (0: none)."""
    hard_slice_factor: int = 2
    """Group-size multiplier of a slice whose running success rate is below 1/rollouts_per_task (1: off)."""
    success_threshold: float = 1.0
    reward_name: str | None = None
    rates: SliceRates = field(default_factory=SliceRates)

    def __post_init__(self) -> None:
        if self.rollouts_per_task < 1:
            raise ValueError(f"rollouts_per_task must be >= 1, got {self.rollouts_per_task!r}")
        if self.max_fill_rounds < 0:
            raise ValueError(f"max_fill_rounds must be >= 0, got {self.max_fill_rounds!r}")
        if self.hard_slice_factor < 1:
            raise ValueError(f"hard_slice_factor must be >= 1, got {self.hard_slice_factor!r}")

    def group_size(self, name: str) -> int:
        """Rollouts per group of slice `name`: larger while the slice rarely succeeds."""
        rate = self.rates.rates.get(name)
        if name in self.rates.agreed_on_failure and rate is not None and rate < 1.0 / self.rollouts_per_task:
            return self.rollouts_per_task * self.hard_slice_factor
        return self.rollouts_per_task

    def by_group_size(self, tasks: Sequence[Task]) -> list[tuple[int, list[Task]]]:
        """`tasks` split by their group size (smallest first), each part in the given order."""
        parts: dict[int, list[Task]] = {}
        for task in tasks:
            parts.setdefault(self.group_size(self.draw.slice_of(task)), []).append(task)
        return sorted(parts.items())

    def begin(self, first: Sequence[RolloutOutcome], *, refill: bool = True) -> StepFill:
        """A step's fill, starting from its first round; `refill` False only measures (no extra rounds)."""
        step = StepFill(self, refill=refill and self.max_fill_rounds > 0)
        step.add_round(first)
        return step


@dataclass
class StepFill:
    """One step's rounds: which groups are informative and what is still missing."""

    fill: BatchFill
    refill: bool = True
    rounds: list[list[RolloutOutcome]] = field(default_factory=list)
    groups: dict[str, Group] = field(default_factory=dict)

    @property
    def first_round(self) -> list[RolloutOutcome]:
        """The unbiased sample of the policy (later rounds are chosen by the first one's outcomes)."""
        return self.rounds[0] if self.rounds else []

    def add_round(self, outcomes: Sequence[RolloutOutcome]) -> None:
        """Record a round's outcomes: classify its groups, update the slices' running success rates."""
        index = len(self.rounds)
        self.rounds.append(list(outcomes))
        fill = self.fill
        members: dict[str, list[RolloutOutcome]] = {}
        for outcome in outcomes:
            members.setdefault(group_key(outcome), []).append(outcome)
        # The sizes the groups were enqueued with, before this round changes the rates.
        sizes = {name: fill.group_size(name) for name in fill.draw.slices}
        for key, found in members.items():
            name = fill.draw.slice_of(found[0].task)
            group = self.groups.setdefault(key, Group(name, index, []))
            group.outcomes += found
            group.draws = max(1, round(len(group.outcomes) / sizes.get(name, fill.rollouts_per_task)))
            group.informative = is_informative(group.outcomes, fill.reward_name)
            if not group.informative and not any(self._solved(o) for o in group.outcomes):
                fill.rates.agreed_on_failure.add(name)
        tried: Counter[str] = Counter()
        solved: Counter[str] = Counter()
        for outcome in outcomes:
            name = fill.draw.slice_of(outcome.task)
            tried[name] += 1
            solved[name] += int(self._solved(outcome))
        for name in sorted(tried):
            fill.rates.observe(name, solved[name], tried[name])

    def _solved(self, outcome: RolloutOutcome) -> bool:
        """A success as `train/success` counts one (a failed rollout's missing reward is 0)."""
        return (outcome.reward or 0.0) >= self.fill.success_threshold

    def informative(self, name: str | None = None) -> int:
        """Informative groups (of slice `name`, or all), a group counted by its draws."""
        return self._draws(name, informative=True)

    def _draws(self, name: str | None, *, informative: bool | None = None) -> int:
        return sum(
            g.draws
            for g in self.groups.values()
            if (name is None or g.slice == name) and (informative is None or g.informative == informative)
        )

    def shortfall(self) -> dict[str, int]:
        """Groups each slice still needs; empty when none does, refills are off or the rounds ran out."""
        if not self.refill or len(self.rounds) > self.fill.max_fill_rounds:
            return {}
        draw = self.fill.draw
        missing = {name: draw.per_slice - self.informative(name) for name in draw.slices}
        return {name: count for name, count in missing.items() if count > 0}

    def refill_tasks(self) -> list[Task]:
        """Fresh tasks for the next round (the shortfall, slice by slice); [] when the step is done."""
        return [task for name, count in self.shortfall().items() for task in self.fill.draw.draw(name, count)]

    def train_outcomes(self) -> list[RolloutOutcome]:
        """What the update trains on: every informative group, padded with the earliest uninformative
        ones up to `tasks_per_step` groups, in the order they were rolled out."""
        chosen = {key for key, g in self.groups.items() if g.informative}
        count = self.informative()
        for key, group in self.groups.items():
            if count >= self.fill.draw.per_step:
                break
            if not group.informative:
                chosen.add(key)
                count += group.draws
        return [o for outcomes in self.rounds for o in outcomes if group_key(o) in chosen]

    def metrics(self) -> dict[str, Any]:
        """`sample/` columns of the step's row (per slice when `balance_by` is set)."""
        fill, draw = self.fill, self.fill.draw
        groups = self._draws(None)
        informative = self.informative()
        row: dict[str, Any] = {
            "sample/rounds": len(self.rounds),
            "sample/rollouts": sum(len(r) for r in self.rounds),
            "sample/informative_groups": informative,
            "sample/uninformative_groups": groups - informative,
            "sample/informative_share": informative / groups if groups else 0.0,
            "sample/hard_slices": sum(fill.group_size(name) > fill.rollouts_per_task for name in draw.slices),
        }
        if draw.balance_by:
            for name in draw.slices:
                total = self._draws(name)
                label = draw.label(name)
                row[f"sample/informative_share[{label}]"] = self.informative(name) / total if total else 0.0
                if name in fill.rates.rates:
                    row[f"sample/success_rate[{label}]"] = fill.rates.rates[name]
        return row
