"""LightningRL: enqueue n rollouts per task -> wait -> credit -> train (verl) -> publish -> repeat."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from algorithm import Algorithm, Evaluate, RolloutOutcome, Task
from algorithm.evaluate import EvaluationResult
from lightningrl.accounting import token_row
from lightningrl.credit import (
    CreditReport,
    RolloutEvidence,
    TrainingSequence,
    assign_credit_to_rollouts,
)
from lightningrl.credit.batch import SequenceBatch
from lightningrl.models.adapter import model_config
from lightningrl.rl.advantages import AdvantageResult
from lightningrl.rl.batch_fill import BatchFill, StepFill
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.continuous import VersionLineage, skip_counts
from lightningrl.rl.continuous_loop import ContinuousTraining
from lightningrl.rl.decisions import first_decisions_row
from lightningrl.rl.health import health_lines, step_health
from lightningrl.rl.hooks import PlanFiler, StopCheck
from lightningrl.rl.metrics import MetricsLog, outcome_metrics, plot_reward_curve
from lightningrl.rl.policy_servers import PolicyServers
from lightningrl.rl.progress import StepProgress, step_info
from lightningrl.rl.regression_guard import RegressionGuard, Validated
from lightningrl.rl.step import rl_step
from lightningrl.rl.step_checkpoints import (
    check_disk_for_checkpoint,
    checkpoints_dir,
    directory_bytes,
    protected_checkpoints,
    prune_step_checkpoints,
    step_checkpoint,
)
from lightningrl.rl.task_draw import TaskDraw
from lightningrl.rl.trackers import RunTrackers
from lightningrl.trainer.protocol import Trainer
from lightningstore import (
    LLM,
    LightningStore,
    ResourceVersion,
    Rollout,
    RolloutStatus,
    Span,
    spans_of_rollouts,
)


class LightningRL(Algorithm):
    """The RL algorithm. Training moves the resource's `latest` pointer only; `approved` is the gate's.

    Two hooks (`rl/hooks.py`) connect it to the release gate, which it knows nothing else of: `stop_check`
    is awaited after each step of `run` and `run_continuous`, and a reason it returns is logged in that
    step's row (`stop/reason`, `stop/stopped`), kept in `stopped_reason`, and ends the loop cleanly
    before the next step; `file_plan` files the training plan before the first step. `fit` installs the
    gate's (`lightningrl.release`: `file_plan_id` always, `gate_stop_check` with `config.gate_stop`)."""

    name = "lightningrl"

    def __init__(
        self,
        store: LightningStore,
        train_tasks: Sequence[Task],
        val_tasks: Sequence[Task] = (),
        config: LightningRLConfig | None = None,
        *,
        trainer: Trainer | None = None,
        console: Console | None = None,
        stop_check: StopCheck | None = None,
        file_plan: PlanFiler | None = None,
    ) -> None:
        super().__init__(store, stable_rollout_ids=bool(config and config.deterministic))
        if not train_tasks:
            raise ValueError("train_tasks must not be empty")
        self.config = self.own_config(config or LightningRLConfig())
        if self.config.gate_stop and stop_check is None:
            raise ValueError(
                "config.gate_stop asks the release gate after each step: pass "
                "stop_check=lightningrl.release.gate_stop_check (fit does)"
            )
        self.stop_check = stop_check
        self.file_plan = file_plan
        self.stopped_reason: str | None = None
        """Why the last `run` / `run_continuous` stopped early (the stop check's reason), else None."""
        self.train_tasks = list(train_tasks)
        self.val_tasks = list(val_tasks)
        self.trainer = trainer
        self.console = console or Console()
        self.metrics = MetricsLog(self.config.output_dir / "metrics.csv")
        self.credit_totals = CreditReport()
        self._tokenizer_checkpoint: str | None = None
        self._draw = TaskDraw(
            self.train_tasks,
            self.config.tasks_per_step,
            balance_by=self.config.balance_by,
            seed=self.config.seed,
        )
        if self._draw.rounding_note:  # decided once: the config (and the plan it files) says the real count
            self.config = dataclasses.replace(self.config, tasks_per_step=self._draw.per_step)
            self.console.print(self._draw.rounding_note, markup=False, highlight=False)
        self._fill = BatchFill(
            self._draw,
            self.config.rollouts_per_task,
            max_fill_rounds=self.config.max_fill_rounds if self.config.dynamic_sampling else 0,
            hard_slice_factor=self.config.hard_slice_factor,
            success_threshold=self.config.success_threshold,
            reward_name=self.config.reward_name,
        )
        self.version: ResourceVersion | None = None
        self.resources_id: str | None = None
        self.bound_resources: dict[str, str] = {}
        """Other resources every rollout is bound to beside the trained LLM (name -> version id)."""
        self.plan_id: str | None = None
        """The training plan this run filed before its first step (`file_plan`), else None."""
        self.lineage = VersionLineage(store)
        self.servers: PolicyServers | None = None
        """The LLM's endpoints and the version they serve (set when the run starts)."""
        self._continuous: ContinuousTraining | None = None
        self.global_step = 0
        """Steps taken by this object across `run` and `run_continuous` (names checkpoints and CSV rows)."""
        self.row_extras: list[Callable[[], dict[str, Any]]] = []
        """Called as each `run` step's row is logged; their columns join it (fit's `faults/` counts)."""
        self.trackers: RunTrackers | None = None
        """The experiment trackers every metrics row goes to: fit opens them for all its stages; else
        `run` opens `config.trackers` itself and closes them when it ends."""
        self._own_trackers = False
        self._checkpoint_bytes: int | None = None
        """The size of the last checkpoint (the start model's before the first): the disk check's need."""
        tolerance = self.config.rollback_on_regression
        if tolerance is not None and trainer is not None:
            raise ValueError("rollback_on_regression rebuilds the trainer from a checkpoint: give no trainer")
        self.regression_guard = RegressionGuard(tolerance) if tolerance is not None else None
        """The best validated version so far, with `rollback_on_regression` (see `validate`)."""

    def own_config(self, config: LightningRLConfig) -> LightningRLConfig:
        """`config` as this algorithm trains with it: a subclass checks or adjusts it here (SFT)."""
        return config

    @property
    def served_version_id(self) -> str | None:
        """The version whose checkpoint the LLM's endpoints serve (None before the run starts)."""
        return self.servers.served_version_id if self.servers else None

    # ---- setup -----------------------------------------------------------------------------------

    async def start(self) -> LLM:
        """Set up once (the start version, its resource set, the training plan, the trainer); the LLM."""
        if self.trackers is None and self.config.trackers:
            self.trackers, self._own_trackers = RunTrackers.for_config(self.config), True
        self.metrics.trackers = self.trackers
        if self.version is not None:
            return self._current_llm()
        version = await self.store.get_latest_version(self.config.resource_name)
        if version is None:
            raise LookupError(
                f"no version of resource {self.config.resource_name!r} is published; publish one first"
            )
        llm = version.resource
        if not isinstance(llm, LLM) or not llm.checkpoint:
            raise ValueError(
                f"resource {self.config.resource_name!r} must be an LLM with a checkpoint to train"
            )
        self.version = version
        if self.config.keep_checkpoints is not None and self.config.show_progress:
            self.console.print(
                f"checkpoints: keeping the newest {self.config.keep_checkpoints} step checkpoints and the "
                "approved and best validated ones (keep_checkpoints; None keeps every step's)",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        self.servers = PolicyServers(
            self.store, llm, engine=self.config.engine, reload=self.config.reload_servers
        )
        self.servers.started_on(version)
        self.resources_id = (
            await self.store.add_resource_set(
                {**self.bound_resources, self.config.resource_name: version.version_id}
            )
        ).resources_id
        await self._file_plan(version)
        if self.trainer is None:
            from lightningrl.trainer import build_trainer

            self.trainer = await asyncio.to_thread(
                build_trainer, llm.checkpoint, self.config.effective_trainer()
            )
        return llm

    async def _file_plan(self, start: ResourceVersion) -> None:
        """Freeze the receipt's before-training part (the training plan) before the first step; every
        version this run publishes names it, so its receipt copies it rather than re-deriving it."""
        if self.file_plan is not None:
            self.plan_id = await self.file_plan(
                self, self.config.resource_name, start.version_id, self.config.summary()
            )

    def _current_llm(self) -> LLM:
        assert self.version is not None and isinstance(self.version.resource, LLM)
        return self.version.resource

    def resume(self) -> int:
        """Continue the run in `config.output_dir`: its metrics rows are kept (new rows append) and step
        numbers continue after the last one, so checkpoints are not overwritten and the step-0
        validation is not repeated. Training starts from the resource's `latest` version, as always.
        Returns the last step found (0 for a fresh directory)."""
        self.metrics = MetricsLog.resume(self.config.output_dir / "metrics.csv")
        self.global_step = max((int(r["step"]) for r in self.metrics.rows if "step" in r), default=0)
        # A different draw order than the first run's, still seeded.
        self._draw.reseed(f"{self.config.seed}/{self.global_step}")
        return self.global_step

    # ---- the loop --------------------------------------------------------------------------------

    async def run(self) -> MetricsLog:
        """Train for `config.steps` steps, validating every `val_every`; returns the metrics.

        With `config.async_rollouts`, step k+1's rollouts are enqueued before step k's update and run
        while it trains, on the version step k trains from; the servers reload between batches."""
        llm = await self.start()
        cfg = self.config
        self.stopped_reason = None
        if cfg.validate_first and cfg.val_every and self.val_tasks and self.global_step == 0:
            self.metrics.log({"step": 0, **(await self.validate(0))})
        ahead = cfg.async_rollouts
        pending: asyncio.Task[list[RolloutOutcome]] | None = None
        try:
            with self._progress() as progress:
                for local_step in range(1, cfg.steps + 1):
                    self.global_step += 1
                    step = self.global_step
                    last = local_step == cfg.steps
                    t0 = time.perf_counter()
                    fill = await self._fill_batch(step, await (pending or await self._start_batch(step)))
                    row: dict[str, Any] = {"step": step, "rollout_seconds": time.perf_counter() - t0}
                    # `train/` describes the first round, the unbiased sample of the policy: refills
                    # are drawn because of its outcomes. `sample/` says what dynamic sampling did.
                    row.update(outcome_metrics(fill.first_round, cfg.success_threshold, prefix="train"))
                    row.update(fill.metrics())
                    outcomes = fill.train_outcomes()
                    pending = None
                    if ahead:
                        row.update(await self._sync_servers())
                        if not last:
                            pending = await self._start_batch(step + 1)
                            row["async/next_enqueued_at"] = time.time()
                        sequences, report, fresh = await self._collect_fresh(outcomes)
                        row.update(fresh)
                    else:
                        sequences, report, tokens = await self.collect(outcomes)
                        row.update(tokens)
                    row.update(await self.update(step, llm, sequences, reload=not ahead))
                    row.update({f"credit/{k}": v for k, v in report.as_dict().items()})
                    if cfg.val_every and (local_step % cfg.val_every == 0 or last) and self.val_tasks:
                        if pending is not None:  # its rollouts must finish on the version they were bound to
                            await asyncio.wait({pending})
                        row.update(await self._sync_servers())
                        row.update(await self.validate(step))
                    if await self._end_step(row, t0, progress):
                        break
        finally:
            self.close_own_trackers()
            if pending is not None:
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pending
        if ahead:
            await self._sync_servers()  # the servers end on `latest`, as in the synchronous loop
        plot_reward_curve(self.metrics, cfg.output_dir / "reward_curve.png")
        return self.metrics

    async def _end_step(self, row: dict[str, Any], started: float, progress: StepProgress) -> bool:
        """Stop checks, the extra columns, the step's time; log the row and advance the bar. True when
        the loop must stop (the reason is reported)."""
        await self.check_stop(row)
        for extra in self.row_extras:
            row.update(extra())
        row["step_seconds"] = time.perf_counter() - started
        health = step_health(self.metrics.rows, row)
        row.update(health.columns)
        self.metrics.log(row)
        progress.advance(step_info(row["train/reward_mean"], row["step_seconds"], row.get("val/success")))
        for line in health.new:  # each problem once, when it first shows (rl/health.py)
            self.console.print(f"[bold yellow]health:[/] {escape(line)}")
        if self.stopped_reason is None:
            return False
        self.report_stop(int(row["step"]))
        return True

    async def _start_batch(self, step: int) -> asyncio.Task[list[RolloutOutcome]]:
        """Enqueue step `step`'s rollouts on the current resource set; a task that waits for them."""
        enqueued = await self._enqueue_groups(self._draw.next(), f"s{step}/")
        return asyncio.create_task(self.wait_for(enqueued, timeout=self.config.step_timeout))

    async def _enqueue_groups(self, tasks: Sequence[Task], group_prefix: str) -> list[tuple[Rollout, Task]]:
        """One group per task: `rollouts_per_task` rollouts, more for a slice that rarely succeeds."""
        enqueued: list[tuple[Rollout, Task]] = []
        for n, part in self._fill.by_group_size(tasks):
            enqueued += await self.enqueue_tasks(
                part, n=n, resources_id=self.resources_id, group_prefix=group_prefix
            )
        return enqueued

    async def _fill_batch(self, step: int, first: list[RolloutOutcome]) -> StepFill:
        """Dynamic sampling (`rl/batch_fill.py`): replace the groups whose rewards agree with fresh
        tasks' groups, one extra round at a time. Not with async rollouts: a refill would sample a
        version other than the one the batch was enqueued on, so there the groups are only measured."""
        fill = self._fill.begin(first, refill=not self.config.async_rollouts)
        while tasks := fill.refill_tasks():
            enqueued = await self._enqueue_groups(tasks, f"s{step}/r{len(fill.rounds)}/")
            fill.add_round(await self.wait_for(enqueued, timeout=self.config.step_timeout))
        return fill

    async def _collect_fresh(
        self, outcomes: Sequence[RolloutOutcome]
    ) -> tuple[list[TrainingSequence], CreditReport, dict[str, Any]]:
        """Async rollouts: drop (and count) those sampled more than `async_max_staleness` publishes behind
        the version being trained, then credit the rest; `async/staleness` is the furthest behind the
        trained transitions' recorded versions are."""
        limit = self.config.async_max_staleness
        succeeded = [o for o in outcomes if o.rollout.status == RolloutStatus.SUCCEEDED]
        spans = await spans_of_rollouts(self.store, [o.rollout.rollout_id for o in succeeded], "latest")
        assert self.version is not None
        fresh, skipped = await self.lineage.split_fresh(
            self.version, [o.rollout for o in succeeded], spans, limit
        )
        kept = {r.rollout_id for r in fresh}
        sequences, report, tokens = await self.collect(
            [o for o in succeeded if o.rollout.rollout_id in kept], spans=spans
        )
        versions = {v for seq in sequences for v in seq.sampled_by}
        stale, unversioned = skip_counts(skipped)
        row: dict[str, Any] = {
            "async/trained_from": self.version.version_id,
            "async/stale_dropped": stale,
            "async/unversioned_dropped": unversioned,
            **tokens,
        }
        behind = await self.lineage.staleness(self.version, versions, limit)
        if behind is not None:
            row["async/staleness"] = behind
        return sequences, report, row

    async def collect(
        self, outcomes: Sequence[RolloutOutcome], *, spans: dict[str, list[Span]] | None = None
    ) -> tuple[list[TrainingSequence], CreditReport, dict[str, Any]]:
        """Spans (latest attempt, one batch read unless given) + rewards of succeeded rollouts -> training
        sequences, the credit report and the step's token accounting (`tokens/` metrics) with the first
        decisions of its rollouts (`decision/first`, rl/decisions.py)."""
        # A crashed attempt's spans are partial: counted in train/failed, not trained on.
        succeeded = [o for o in outcomes if o.rollout.status == RolloutStatus.SUCCEEDED]
        if spans is None:
            spans = await spans_of_rollouts(self.store, [o.rollout.rollout_id for o in succeeded], "latest")
        sequences, report = assign_credit_to_rollouts(
            (
                RolloutEvidence(o.rollout.group_id, spans[o.rollout.rollout_id], list(o.rewards))
                for o in succeeded
            ),
            self.config,
        )
        self.credit_totals = self.credit_totals + report
        used = (span for o in succeeded for span in spans[o.rollout.rollout_id])
        # The tokenizer never changes in a run: read it from the first checkpoint trained, not every step's.
        if (
            self._tokenizer_checkpoint is None
            and self.version is not None
            and isinstance(self.version.resource, LLM)
        ):
            self._tokenizer_checkpoint = self.version.resource.checkpoint
        decisions = first_decisions_row((o.task.tags, spans[o.rollout.rollout_id]) for o in succeeded)
        return sequences, report, {**token_row(used, report, self._tokenizer_checkpoint), **decisions}

    async def update(
        self,
        step: int,
        llm: LLM,
        sequences: list[TrainingSequence],
        *,
        advantages: Callable[[SequenceBatch], AdvantageResult] | None = None,
        metadata: dict[str, Any] | None = None,
        reload: bool = True,
    ) -> dict[str, Any]:
        """One RL step (`rl/step.py`: advantages, `config.advantage`'s unless given, and the actor
        update) -> checkpoint -> publish a candidate (with `metadata` beside the step's own) -> reload
        servers (unless `reload` is False: the caller does it later, with `_sync_servers`)."""
        assert self.trainer is not None and self.version is not None
        t0 = time.perf_counter()
        row = await rl_step(
            step,
            sequences,
            self.trainer,
            self.config.advantage,
            pad_token_id=self._pad_token_id(llm),
            console=self.console,
            advantages=advantages,
        )
        if row.get("update/skipped"):
            return row
        if self._checkpoint_bytes is None:
            self._checkpoint_bytes = directory_bytes(Path(llm.checkpoint)) if llm.checkpoint else 0
        check_disk_for_checkpoint(
            self.config.output_dir, self._checkpoint_bytes, self.config.keep_checkpoints
        )
        checkpoint = await asyncio.to_thread(
            self.trainer.save_checkpoint, step_checkpoint(self.config.output_dir, step)
        )
        self._checkpoint_bytes = directory_bytes(Path(checkpoint))
        row["update/train_seconds"] = time.perf_counter() - t0
        summary = {k: v for k, v in row.items() if isinstance(v, int | float)}
        version, resource_set = await self.publish(
            self.config.resource_name,
            llm.model_copy(update={"checkpoint": str(checkpoint)}),
            parent_id=self.version.version_id,
            artifact=str(checkpoint),
            others=self.bound_resources,
            metadata={
                **(metadata or {}),
                "plan_id": self.plan_id,
                "step": step,
                "metrics": summary,
                # The run's health lines (rl/health.py) over the steps logged before this one.
                "health": [line.text for line in health_lines(self.metrics.rows)],
                "algorithm_config": self.config.summary(),
            },
        )
        self.version, self.resources_id = version, resource_set.resources_id
        if reload:
            row.update(await self._sync_servers())
        if self.config.keep_checkpoints is not None:
            pruned = prune_step_checkpoints(
                checkpoints_dir(self.config.output_dir),
                self.config.keep_checkpoints,
                protect=await protected_checkpoints(
                    self.store, self.config.resource_name, self.metrics.rows, self.config.output_dir
                ),
            )
            row["update/checkpoints_pruned"] = len(pruned)
        row["update/version_id"] = version.version_id
        return row

    async def _sync_servers(self) -> dict[str, Any]:
        """Make the LLM's endpoints serve `self.version` (see `PolicyServers.serve`)."""
        assert self.servers is not None and self.version is not None
        return await self.servers.serve(self.version)

    async def validate(self, step: int | None = None) -> dict[str, Any]:
        """Held-out success of the current version (and the seconds the validation took); with
        `rollback_on_regression`, a fall below the best version so far moves back to it (`rollback/`)."""
        started = time.perf_counter()
        result = await self.evaluate(
            self.val_tasks, group_prefix=f"val{step}/" if step is not None else "val/"
        )
        row = {
            "val/success": result.success_rate,
            "val/reward_mean": result.mean_reward,
            "val/seconds": time.perf_counter() - started,
        }
        row.update({f"val/success[{k}]": v for k, v in result.by_tag.items()})
        if self.regression_guard is not None and self.version is not None:
            validated = Validated(self.version.version_id, result.success_rate, step or 0)
            best = self.regression_guard.observe(validated)
            if best is not None:
                row.update(await self._roll_back(best, validated))
        return row

    async def _roll_back(self, best: Validated, fell: Validated) -> dict[str, Any]:
        """Move `latest` back to the best validated version, train on from it (a trainer rebuilt from its
        checkpoint) and serve it; the `rollback/` columns and a console line say so."""
        name = self.config.resource_name
        reason = (
            f"held-out success {fell.success:.2f} after step {fell.step} fell more than "
            f"{self.config.rollback_on_regression} below {best.success:.2f} after step {best.step}"
        )
        target = await self.store.get_resource_version(best.version_id)
        assert target is not None and isinstance(target.resource, LLM) and target.resource.checkpoint
        await self.store.move_pointer(name, "latest", target.version_id, actor=self.name, reason=reason)
        resource_set = await self.store.add_resource_set({**self.bound_resources, name: target.version_id})
        self.version, self.resources_id = target, resource_set.resources_id
        close = getattr(self.trainer, "close", None)
        if callable(close):
            close()
        self.trainer = None  # the regressed policy's weights go before the best one's load
        from lightningrl.trainer import build_trainer

        self.trainer = await asyncio.to_thread(
            build_trainer, target.resource.checkpoint, self.config.effective_trainer()
        )
        self.console.print(f"[bold yellow]rolled back to {escape(target.version_id)}:[/] {escape(reason)}")
        return {
            "rollback/to_version": target.version_id,
            "rollback/from_version": fell.version_id,
            "rollback/reason": reason,
            **(await self._sync_servers()),
        }

    async def evaluate(self, tasks: Sequence[Task], *, group_prefix: str = "eval/") -> EvaluationResult:
        return await Evaluate(
            self.store,
            tasks,
            resources_id=self.resources_id,
            n=self.config.val_rollouts_per_task,
            mode=self.config.val_mode,
            timeout=self.config.step_timeout,
            success_threshold=self.config.success_threshold,
            group_prefix=group_prefix,
            stable_rollout_ids=self.stable_rollout_ids,
        ).run()

    # ---- continuous mode ---------------------------------------------------------------------------

    async def run_continuous(
        self,
        *,
        max_steps: int,
        min_rollouts: int = 32,
        poll_interval: float = 1.0,
        idle_timeout: float = 60.0,
    ) -> MetricsLog:
        """Train on rollouts that OTHERS enqueue (e.g. production traffic in train mode), by
        `config.continuous`: poll for finished train rollouts since the last poll (a time cursor, resumed
        from the `data_cutoff` the latest version records); once `min_rollouts` have gathered, skip those
        sampled by versions older than `max_staleness`, baseline the rest without needing groups, and
        train. Consumed rollouts are marked in their metadata (trained or skipped, never used twice);
        each published version records its data cutoff and what was skipped."""
        if self._continuous is None:
            self._continuous = ContinuousTraining(self)
        try:
            return await self._continuous.run(
                max_steps=max_steps,
                min_rollouts=min_rollouts,
                poll_interval=poll_interval,
                idle_timeout=idle_timeout,
            )
        finally:
            self.close_own_trackers()

    # ---- helpers ---------------------------------------------------------------------------------

    def close_own_trackers(self) -> None:
        """Close the trackers `start` opened (fit closes the ones it opened)."""
        if self._own_trackers and self.trackers is not None:
            self.trackers.close()
            self.trackers, self._own_trackers = None, False

    async def check_stop(self, row: dict[str, Any]) -> None:
        """Ask the stop check; a reason goes into the step's row and `stopped_reason`."""
        if self.stop_check is None:
            return
        reason = await self.stop_check(self)
        if reason:
            self.stopped_reason = reason
            row.update({"stop/stopped": 1, "stop/reason": reason})

    def report_stop(self, step: int) -> None:
        self.console.print(
            f"[bold yellow]LightningRL stopped after step {step}:[/] {escape(self.stopped_reason or '')}"
        )

    def _pad_token_id(self, llm: LLM) -> int:
        return int(model_config(llm.checkpoint or "").get("pad_token_id") or 0)

    def _progress(self) -> StepProgress:
        """A bar on a terminal; one line per step (`step 3/60  reward 0.83  ...`) otherwise."""
        return StepProgress(
            self.console, self.config.steps, bar_label="RL steps", enabled=self.config.show_progress
        )
