"""SFT on successes (rejection-sampling fine-tuning): enqueue -> keep the successful rollouts -> NLL on
their response tokens through the same verl actor -> publish -> repeat.

The update is verl's PPO-clip loss with advantage +1 on every response token, old log-probs recomputed
from the current weights, one epoch, one mini-batch: the ratio is 1 and unclipped, so the gradient is
that of the token-mean NLL (docs/algorithms.md). `sft_config` refuses the settings that would break it.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Sequence
from typing import Any

import torch

from algorithm import RolloutOutcome, Task
from lightningrl.credit.batch import SequenceBatch
from lightningrl.rl.advantages import AdvantageResult
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.loop import LightningRL
from lightningrl.rl.metrics import MetricsLog, outcome_metrics, plot_reward_curve
from lightningrl.trainer.protocol import Trainer
from lightningstore import LightningStore

SFT_KEY = "sft"
"""The metadata key of a version SFT published: which rollouts it trained on, how many it left out."""


def sft_config(config: LightningRLConfig) -> LightningRLConfig:
    """`config` as SFT trains with it: the loss reduces to NLL only for one optimiser step on a batch
    scored by its own weights, so several epochs or mini-batches, an entropy bonus and async rollouts are
    refused (naming the field); the rollout-logprob correction is turned off (it would weigh the NLL)."""
    trainer = config.trainer
    if trainer.ppo_epochs != 1:
        raise ValueError(
            f"SFT makes one pass per step: trainer.ppo_epochs must be 1, got {trainer.ppo_epochs}"
        )
    if trainer.mini_batch_size is not None:
        raise ValueError(
            "SFT makes one optimiser step per batch (a later mini-batch would be scored off-policy and "
            f"clipped): trainer.mini_batch_size must be None, got {trainer.mini_batch_size}"
        )
    if trainer.loss.entropy_coeff != 0.0:
        raise ValueError(
            f"SFT's loss is NLL: trainer.loss.entropy_coeff must be 0, got {trainer.loss.entropy_coeff}"
        )
    if config.async_rollouts:
        raise ValueError("SFT trains on the rollouts of the version it updates: async_rollouts must be False")
    loss = dataclasses.replace(trainer.loss, rollout_is_threshold=None)
    return dataclasses.replace(config, trainer=dataclasses.replace(trainer, loss=loss))


def nll_advantages(batch: SequenceBatch) -> AdvantageResult:
    """+1 on every response token of every row (masked tokens carry no loss): the NLL's weights."""
    ones = batch.response_mask.float()
    return AdvantageResult(
        advantages=ones,
        returns=ones.clone(),
        keep=torch.ones(len(batch), dtype=torch.bool),
        groups=len(set(batch.group_ids)),
        dropped_groups=0,
    )


class SFT(LightningRL):
    """Rejection-sampling fine-tuning on the RL loop's machinery: the same rollouts, credit assignment
    (exact token ids from the store), verl actor, checkpoints, versions, training plan and validation.

    A rollout is a success when it finished (`succeeded`) and its primary reward is at least
    `config.success_threshold`; only successes are trained on. A step without one publishes nothing."""

    name = "sft"

    def own_config(self, config: LightningRLConfig) -> LightningRLConfig:
        """`config` checked and adjusted for SFT (see `sft_config`)."""
        return sft_config(config)

    @functools.cached_property
    def trained_rollouts(self) -> dict[int, list[str]]:
        """Step -> the rollout ids its update trained on (also on the published version's metadata)."""
        return {}

    def successes(self, outcomes: Sequence[RolloutOutcome]) -> list[RolloutOutcome]:
        """The outcomes SFT trains on: finished rollouts whose reward reaches the threshold."""
        threshold = self.config.success_threshold
        return [o for o in outcomes if o.succeeded and o.reward is not None and o.reward >= threshold]

    async def run(self) -> MetricsLog:
        """`config.steps` SFT steps, validating every `val_every` (and before the first); the metrics."""
        llm = await self.start()
        cfg = self.config
        self.stopped_reason = None
        if cfg.validate_first and cfg.val_every and self.val_tasks and self.global_step == 0:
            self.metrics.log({"step": 0, **(await self.validate(0))})
        with self._progress() as progress:
            for local_step in range(1, cfg.steps + 1):
                self.global_step += 1
                step = self.global_step
                t0 = time.perf_counter()
                outcomes = await (await self._start_batch(step))
                row: dict[str, Any] = {"step": step, "rollout_seconds": time.perf_counter() - t0}
                row.update(outcome_metrics(outcomes, cfg.success_threshold, prefix="train"))
                kept = self.successes(outcomes)
                trained = sorted(o.rollout.rollout_id for o in kept)
                row.update({"sft/successes": len(kept), "sft/left_out": len(outcomes) - len(kept)})
                sequences, report, tokens = await self.collect(kept)
                row.update(tokens)
                record = {"trained_rollouts": trained, "left_out": len(outcomes) - len(kept)}
                row.update(
                    await self.update(
                        step, llm, sequences, advantages=nll_advantages, metadata={SFT_KEY: record}
                    )
                )
                if "update/version_id" in row:
                    self.trained_rollouts[step] = trained
                row.update({f"credit/{k}": v for k, v in report.as_dict().items()})
                if (
                    cfg.val_every
                    and self.val_tasks
                    and (local_step % cfg.val_every == 0 or local_step == cfg.steps)
                ):
                    row.update(await self.validate(step))
                if await self._end_step(row, t0, progress):
                    break
        plot_reward_curve(self.metrics, cfg.output_dir / "reward_curve.png")
        return self.metrics

    async def run_continuous(self, **_: Any) -> MetricsLog:
        raise TypeError("SFT trains on the rollouts it enqueues; continuous learning is LightningRL's")


async def run_sft(
    store: LightningStore,
    train_tasks: Sequence[Task],
    val_tasks: Sequence[Task] = (),
    config: LightningRLConfig | None = None,
    *,
    trainer: Trainer | None = None,
) -> MetricsLog:
    """Run SFT on the store's `config.resource_name` LLM (its latest version is where training starts)."""
    return await SFT(store, train_tasks, val_tasks, config, trainer=trainer).run()
