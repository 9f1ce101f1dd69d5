"""`LightningRL.run_continuous`: train on finished rollouts that others enqueue (production traffic)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from algorithm import RolloutOutcome, Task
from algorithm.base import primary_reward
from lightningrl.credit import CreditReport, TrainingSequence
from lightningrl.credit.batch import SequenceBatch
from lightningrl.rl.advantages import AdvantageResult, compute_advantages
from lightningrl.rl.baseline import RUNNING_BASELINES, RunningBaseline
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.continuous import (
    CUTOFF_KEY,
    SKIPPED_MARK,
    TRAINED_MARK,
    RolloutFeed,
    VersionLineage,
    skip_counts,
    task_key,
)
from lightningrl.rl.metrics import MetricsLog, outcome_metrics, plot_reward_curve
from lightningstore import (
    LLM,
    LightningStore,
    ResourceVersion,
    Rollout,
    Span,
    rewards_of_rollouts,
    spans_of_rollouts,
)


class TrainingLoop(Protocol):
    """What continuous mode uses of its `LightningRL` (named here so the two modules do not import
    each other)."""

    store: LightningStore
    config: LightningRLConfig
    version: ResourceVersion | None
    lineage: VersionLineage
    metrics: MetricsLog
    global_step: int
    stopped_reason: str | None

    async def start(self) -> LLM: ...
    async def collect(
        self, outcomes: Sequence[RolloutOutcome], *, spans: dict[str, list[Span]] | None = None
    ) -> tuple[list[TrainingSequence], CreditReport, dict[str, float]]: ...
    async def update(
        self,
        step: int,
        llm: LLM,
        sequences: list[TrainingSequence],
        *,
        advantages: Callable[[SequenceBatch], AdvantageResult] | None = None,
        metadata: dict[str, Any] | None = None,
        reload: bool = True,
    ) -> dict[str, Any]: ...
    async def check_stop(self, row: dict[str, Any]) -> None: ...
    def report_stop(self, step: int) -> None: ...


class ContinuousTraining:
    """The continuous mode of one `LightningRL`: its feed's cursor and running baseline live here."""

    def __init__(self, rl: TrainingLoop) -> None:
        self.rl = rl
        self._feed: RolloutFeed | None = None
        self._baseline: RunningBaseline | None = None

    async def run(
        self, *, max_steps: int, min_rollouts: int, poll_interval: float, idle_timeout: float
    ) -> MetricsLog:
        """See `LightningRL.run_continuous`."""
        rl = self.rl
        llm = await rl.start()
        rl.stopped_reason = None
        if self._feed is None:
            assert rl.version is not None
            cutoff = rl.version.metadata.get(CUTOFF_KEY, {}).get("data_cutoff")
            self._feed = RolloutFeed(rl.store, rl.config.continuous, cursor=cutoff)
        pending: list[Rollout] = []
        steps = 0
        idle_since = time.monotonic()
        while steps < max_steps:
            pending += await self._feed.poll()
            if len(pending) < min_rollouts:
                if time.monotonic() - idle_since > idle_timeout:
                    break
                await asyncio.sleep(poll_interval)
                continue
            batch, pending = pending, []
            steps += 1
            rl.global_step += 1
            row = await self.step(llm, batch)
            await rl.check_stop(row)
            rl.metrics.log(row)
            if rl.stopped_reason is not None:
                rl.report_stop(rl.global_step)
                break
            idle_since = time.monotonic()
        if rl.metrics.rows:
            plot_reward_curve(rl.metrics, rl.config.output_dir / "reward_curve.png")
        return rl.metrics

    async def step(self, llm: LLM, rollouts: list[Rollout]) -> dict[str, Any]:
        """One update on polled rollouts: freshness, group-free advantages, publish with the data cutoff."""
        rl = self.rl
        assert rl.version is not None
        cc = rl.config.continuous
        spans = await spans_of_rollouts(rl.store, [r.rollout_id for r in rollouts], "latest")
        fresh, skipped = await rl.lineage.split_fresh(rl.version, rollouts, spans, cc.max_staleness)
        rewards = await rewards_of_rollouts(rl.store, [r.rollout_id for r in fresh])
        outcomes = [
            RolloutOutcome(
                rollout=r.model_copy(update={"group_id": task_key(r)}),
                task=Task(task_id=task_key(r), input=r.input),
                reward=primary_reward(rewards[r.rollout_id]),
                rewards=rewards[r.rollout_id],
            )
            for r in fresh
        ]
        stale, unversioned = skip_counts(skipped)
        row: dict[str, Any] = {
            "step": rl.global_step,
            "continuous": 1,
            "continuous/polled": len(rollouts),
            "continuous/skipped_stale": stale,
            "continuous/skipped_unversioned": unversioned,
        }
        row.update(outcome_metrics(outcomes, rl.config.success_threshold, prefix="train"))
        sequences, report, tokens = await rl.collect(outcomes, spans=spans)
        row.update(tokens)
        record = {
            "data_cutoff": max(r.end_time or 0.0 for r in rollouts),
            "rollouts": len(fresh),
            "skipped_stale": stale,
            "skipped_unversioned": unversioned,
            "max_staleness": cc.max_staleness,
            "baseline": self._baseline.state() if self._baseline else cc.baseline,
        }
        row.update(
            await rl.update(
                rl.global_step, llm, sequences, advantages=self.advantages, metadata={CUTOFF_KEY: record}
            )
        )
        row.update({f"credit/{k}": v for k, v in report.as_dict().items()})
        for r in rollouts:
            mark = {SKIPPED_MARK: skipped[r.rollout_id]} if r.rollout_id in skipped else {}
            await rl.store.update_rollout(
                r.rollout_id, metadata={**r.metadata, TRAINED_MARK: rl.global_step, **mark}
            )
        return row

    def advantages(self, batch: SequenceBatch) -> AdvantageResult:
        """`config.continuous.baseline`'s advantages: a running baseline, the batch's, or the groups'."""
        config = self.rl.config
        cc = config.continuous
        if cc.baseline in RUNNING_BASELINES:
            if self._baseline is None:
                self._baseline = RunningBaseline.named(cc.baseline, decay=cc.baseline_decay)
            return self._baseline.advantages(batch, config.advantage)
        if cc.baseline == "batch":
            return compute_advantages(
                batch, dataclasses.replace(config.advantage, estimator="reinforce_plus_plus")
            )
        return compute_advantages(batch, config.advantage)
