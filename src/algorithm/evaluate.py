"""Evaluate: run a resource set on tasks and report success — the simplest algorithm."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from algorithm.base import Algorithm, RolloutOutcome
from algorithm.task import Task
from lightningstore import LightningStore, RolloutConfig, RolloutMode


@dataclass
class EvaluationResult:
    outcomes: list[RolloutOutcome]
    success_threshold: float
    by_tag: dict[str, float] = field(default_factory=dict)

    @property
    def success_rate(self) -> float:
        if not self.outcomes:
            return 0.0
        return sum(1 for o in self.outcomes if (o.reward or 0.0) >= self.success_threshold) / len(
            self.outcomes
        )

    @property
    def mean_reward(self) -> float:
        return sum(o.reward or 0.0 for o in self.outcomes) / max(1, len(self.outcomes))


class Evaluate(Algorithm):
    """Enqueue every task (n times) in `mode` against `resources_id`, wait, and score."""

    name = "evaluate"

    def __init__(
        self,
        store: LightningStore,
        tasks: Sequence[Task],
        *,
        resources_id: str | None,
        n: int = 1,
        mode: RolloutMode | str = RolloutMode.VAL,
        timeout: float = 600.0,
        success_threshold: float = 1.0,
        rollout_config: RolloutConfig | None = None,
        group_prefix: str = "eval-",
        stable_rollout_ids: bool = False,
    ) -> None:
        super().__init__(store, rollout_config=rollout_config, stable_rollout_ids=stable_rollout_ids)
        self.tasks = list(tasks)
        self.resources_id = resources_id
        self.n = n
        self.mode = mode
        self.timeout = timeout
        self.success_threshold = success_threshold
        self.group_prefix = group_prefix

    async def run(self) -> EvaluationResult:
        enqueued = await self.enqueue_tasks(
            self.tasks,
            n=self.n,
            mode=self.mode,
            resources_id=self.resources_id,
            group_prefix=self.group_prefix,
        )
        outcomes = await self.wait_for(enqueued, timeout=self.timeout)
        return EvaluationResult(
            outcomes, self.success_threshold, by_tag=success_by_tag(outcomes, self.success_threshold)
        )


def success_by_tag(outcomes: Sequence[RolloutOutcome], threshold: float) -> dict[str, float]:
    """Success rate per tag value ("op=plus": 0.9, ...)."""
    hits: dict[str, list[bool]] = defaultdict(list)
    for o in outcomes:
        for key, value in o.task.tags.items():
            hits[f"{key}={value}"].append((o.reward or 0.0) >= threshold)
    return {k: sum(v) / len(v) for k, v in sorted(hits.items())}
