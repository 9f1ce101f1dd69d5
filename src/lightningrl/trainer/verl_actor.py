"""VerlActorTrainer: verl's own actor update (TrainingWorker, FSDP engine) driven in-process.

It drives the worker as `RayPPOTrainer._compute_old_log_prob` and `_update_actor` do: `infer_batch`
for the old log-probs, then `train_mini_batch` with verl's `ppo_loss` — except on an on-policy step
(one epoch, one mini-batch), where the update's own forward gives the old log-probs and no separate
pass runs (`loss.ppo_loss_own_old_log_probs`). On a machine without an
accelerator verl runs through `lightningrl.verl_cpu`; on GPUs nothing here is CPU-specific.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from lightningrl.accounting.mismatch import logprob_mismatch
from lightningrl.credit.batch import SequenceBatch
from lightningrl.models.adapter import base_of
from lightningrl.quiet import quiet_third_party
from lightningrl.trainer import shared_prefix
from lightningrl.trainer.batch_layout import RowLayout, divisor_at_most, padded_share, rank_major_order
from lightningrl.trainer.checkpoint import write_policy
from lightningrl.trainer.config import TrainerConfig
from lightningrl.trainer.entropy import entropy_stats, first_call_tokens
from lightningrl.trainer.loss import (
    DECISION_MASK,
    ON_POLICY,
    ROLLOUT_LOG_PROBS,
    measured_in_loss,
    ppo_loss_own_old_log_probs,
    truncated_is_weights,
)
from lightningrl.trainer.process_group import ensure_process_group
from lightningrl.trainer.reference_policy import ReferencePolicy
from lightningrl.trainer.shared_prefix import SHARED_PREFIX
from lightningrl.trainer.verl_config import actor_dtype, slow_half_precision, verl_configs
from lightningrl.trainer.verl_data import mean_metric, response_values, to_verl_input
from lightningrl.verl_cpu.engines import import_verl_engines

logger = logging.getLogger(__name__)


class VerlActorTrainer:
    """A policy held by verl's FSDP2 engine: log-probs, PPO-clip steps, HF checkpoints (or LoRA adapters).

    This class runs verl's worker in the calling process (one rank); `RayTrainer` overrides the four
    worker hooks (`_start_worker`, `_infer`, `_train`, `_write`) to run `num_workers` ranks on Ray.
    """

    def __init__(self, model_dir: str | Path, config: TrainerConfig | None = None) -> None:
        # The plugin must be registered before verl's engine modules read the device at import.
        from lightningrl.verl_cpu import cpu_wanted, verl_device_name

        self.model_dir = Path(model_dir)
        self.base_dir = base_of(self.model_dir)
        """The full checkpoint under `model_dir` (itself, unless it is a LoRA adapter)."""
        self.config = config or TrainerConfig()
        if self.ranks != self.config.num_workers:
            raise ValueError(
                f"{type(self).__name__} runs {self.ranks} rank(s), but trainer.num_workers="
                f"{self.config.num_workers}: use RayTrainer (build_trainer picks it for backend='ray')"
            )
        self.device = verl_device_name()
        if self.device == "cuda" and not torch.cuda.is_available() and self.config.backend == "local":
            raise RuntimeError(
                "verl resolved the 'cuda' platform but torch sees no GPU; import lightningrl.verl_cpu "
                f"before verl (or set VERL_PLATFORM=cpu); cpu plugin wanted: {cpu_wanted()}"
            )
        slow = slow_half_precision(actor_dtype(self.config, self.device), self.device)
        if slow:
            logger.warning("%s", slow)
        self._actor_config, worker_config = verl_configs(self.model_dir, self.config, self.device)
        self._start_worker(worker_config)
        self._reference: ReferencePolicy | None = None
        self._reference_is_base = False
        """LoRA from the base: the KL reference is the policy with its adapter switched off (verl's
        own LoRA reference), computed by the engine itself, with no second copy of the model."""
        if self.config.loss.kl_loss_coef > 0:
            if self.config.lora_rank > 0 and self.model_dir == self.base_dir:
                self._reference_is_base = True
            else:
                dtype = actor_dtype(self.config, self.device)
                self._reference = ReferencePolicy(
                    self.model_dir, self.device, dtype, self.config.micro_batch_size
                )

    @property
    def ranks(self) -> int:
        """Data-parallel ranks a batch is split over (each gets an equal share of rows)."""
        return 1

    # ---- the worker: in this process -----------------------------------------------------------

    def _start_worker(self, worker_config: Any) -> None:
        ensure_process_group(self.device)
        import_verl_engines()
        from verl.workers.engine_workers import TrainingWorker

        # verl prints its setup (parameter count, memory, NUMA affinity, schedule) to stdout.
        with quiet_third_party():
            self._worker = TrainingWorker(config=worker_config)
            self._worker.reset()
        shared_prefix.install(self._worker.engine)
        self._worker.set_loss_fn(self._loss_fn())

    def _loss_fn(self) -> Any:
        """verl's PPO loss, taking an on-policy step's old log-probs from its own forward."""
        return partial(
            ppo_loss_own_old_log_probs,
            config=self._actor_config,
            is_threshold=self.config.loss.rollout_is_threshold,
        )

    def _infer(self, data: TensorDict) -> TensorDict:
        with quiet_third_party():
            return self._worker.infer_batch(data)

    def _train(self, data: TensorDict) -> TensorDict:
        with quiet_third_party():
            return self._worker.train_mini_batch(data)

    def _write(self, out: Path) -> None:
        write_policy(self._worker.engine, self.model_dir, self.base_dir, out)

    # ---- the Trainer protocol ------------------------------------------------------------------

    def compute_log_probs(self, batch: SequenceBatch) -> torch.Tensor:
        """Current policy's log-prob of every response token, (B, R) (`_compute_old_log_prob`)."""
        return self._score(batch)[0]

    def _one_mini_batch_layout(self, batch: SequenceBatch) -> RowLayout:
        """One mini-batch in micro-batches of whole prompt groups (by length without shared prefixes)."""
        return RowLayout.for_one_mini_batch(
            batch.prompts,
            batch.attention_mask,
            self.ranks,
            self.config.micro_batch_size,
            by_prompt=self.config.shared_prefix,
        )

    def _score(
        self, batch: SequenceBatch, *, adapter: bool = True, entropy: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Log-probs of the response tokens and, with `entropy`, the policy's entropy at each (both (B, R),
        0 on padding), from one forward; `adapter=False` scores the LoRA base (verl's ref path)."""
        layout = self._one_mini_batch_layout(batch)
        laid = layout.apply(batch)
        data = to_verl_input(
            laid,
            {},
            {
                "calculate_entropy": entropy,
                "compute_loss": False,
                SHARED_PREFIX: self.config.shared_prefix,
                # The rollouts' own sampling temperature (recorded on their spans), never a setting.
                "temperature": laid.temperature,
                "global_token_num": laid.attention_mask.sum(dim=1).tolist(),
                "micro_batch_size_per_gpu": layout.micro_batch,
                **({} if adapter else {"no_lora_adapter": True}),
            },
        )
        output = self._infer(data)
        real = laid.attention_mask[:, laid.prompts.shape[1] :]
        log_probs = layout.restore(response_values(output, "log_probs", data) * real)
        if not entropy:
            return log_probs, None
        return log_probs, layout.restore(response_values(output, "entropy", data) * real)

    def train_step(self, batch: SequenceBatch, advantages: torch.Tensor) -> dict[str, float]:
        """Old log-probs (the update's own forward when on-policy), TIS weights against the rollout's
        logprobs, then verl's actor update."""
        from verl.utils import tensordict_utils as tu

        started = time.perf_counter()
        if not len(batch):
            raise ValueError("train_step got an empty batch (were all groups dropped as uniform?)")
        if advantages.shape != batch.responses.shape:
            raise ValueError(
                f"advantages must be {tuple(batch.responses.shape)}, got {tuple(advantages.shape)}"
            )
        loss_config = self.config.loss
        if batch.temperature != 1.0 and loss_config.rollout_is_threshold is not None:
            # Backends report temperature-1 logprobs (vLLM's default, our server's): the IS weights
            # would compare them with log-probs at another temperature.
            raise ValueError(
                f"the batch was sampled at temperature {batch.temperature}, but rollout_is_threshold="
                f"{loss_config.rollout_is_threshold} compares with the backend's temperature-1 logprobs: "
                "set rollout_is_threshold=None to train on it"
            )
        real_rows = len(batch)
        # verl splits a step into equal mini-batches, each split evenly over the ranks.
        mini_batch = self.config.mini_batch_size or real_rows
        mini_batch += -mini_batch % self.ranks
        # One epoch over one mini-batch: the policy that scores the batch in the update's own forward IS
        # the old policy (the PPO ratio is 1), so no separate pass recomputes the old log-probs.
        one_mini_batch = mini_batch >= real_rows
        on_policy = self.config.ppo_epochs == 1 and one_mini_batch and not self.config.recompute_old_log_probs
        if one_mini_batch:
            # One mini-batch: the rows' order changes nothing in the step (the loss is normalised over the
            # whole mini-batch). Each micro-batch holds whole prompt groups where they fit, so a prompt is
            # computed once (shared prefix); else rows of like lengths, each micro-batch padded less.
            layout = self._one_mini_batch_layout(batch)
        else:
            micro = divisor_at_most(mini_batch // self.ranks, self.config.micro_batch_size)
            layout = RowLayout.in_order(real_rows, real_rows + -real_rows % mini_batch, micro)
        batch, advantages = layout.apply(batch), layout.rows_of(advantages)
        if one_mini_batch:
            mini_batch = len(batch)
        micro_batch, padding = layout.micro_batch, layout.padding
        if self.ranks > 1:
            # verl hands rank r the r-th contiguous slice and each rank walks its slice in mini-batches:
            # reorder so that optimiser step j sees the rows one rank would see in step j.
            order = rank_major_order(len(batch), mini_batch, self.ranks)
            batch, advantages = batch.select(order), advantages[order]
        recompute_started = time.perf_counter()
        tensors = {"advantages": advantages.float() * batch.response_mask}
        mismatch: dict[str, float] = {}
        is_metrics: dict[str, float] = {}
        entropy_measured: dict[str, float] = {}
        if on_policy:
            tensors[ROLLOUT_LOG_PROBS] = batch.rollout_log_probs.float()
            tensors[DECISION_MASK] = first_call_tokens(batch.call_ids).float()
        else:
            # verl's `_compute_old_log_prob`: the entropy comes from the same forward as the old log-probs.
            old_log_probs, entropy = self._score(batch, entropy=True)
            assert entropy is not None
            entropy_measured = entropy_stats(entropy, batch.response_mask, batch.call_ids)
            # Server log-probs are temperature-1 ones: comparable with the trainer's only at temperature 1.
            if batch.temperature == 1.0:
                mismatch = logprob_mismatch(old_log_probs, batch.rollout_log_probs, batch.response_mask)
            tensors["old_log_probs"] = old_log_probs
            if loss_config.rollout_is_threshold is not None:
                weights, is_metrics = truncated_is_weights(
                    old_log_probs,
                    batch.rollout_log_probs,
                    batch.response_mask,
                    loss_config.rollout_is_threshold,
                )
                tensors["rollout_is_weights"] = weights
        recompute_s = time.perf_counter() - recompute_started
        if self._reference is not None:
            tensors["ref_log_prob"] = self._reference.log_probs(batch)
        elif self._reference_is_base:
            tensors["ref_log_prob"] = self._score(batch, adapter=False)[0]
        data = to_verl_input(
            batch,
            tensors,
            {
                "calculate_entropy": on_policy or loss_config.entropy_coeff != 0.0,
                ON_POLICY: on_policy,
                SHARED_PREFIX: self.config.shared_prefix,
                "temperature": batch.temperature,
                "global_batch_size": mini_batch,
                "mini_batch_size": mini_batch,
                "epochs": self.config.ppo_epochs,
                "seed": self.config.seed,
                "dataloader_kwargs": {"shuffle": self.config.shuffle},
                "compute_loss": True,
                "micro_batch_size_per_gpu": micro_batch,
            },
        )
        metrics = tu.get(self._train(data), "metrics")
        result = {
            "loss": mean_metric(metrics, "loss"),
            "grad_norm": mean_metric(metrics, "grad_norm"),
            "pg_loss": mean_metric(metrics, "actor/pg_loss"),
            "pg_clipfrac": mean_metric(metrics, "actor/pg_clipfrac"),
            "pg_clipfrac_lower": mean_metric(metrics, "actor/pg_clipfrac_lower"),
            "ppo_kl": mean_metric(metrics, "actor/ppo_kl"),
            "kl_loss": mean_metric(metrics, "kl_loss"),
            "lr": mean_metric(metrics, "lr"),
            "mfu": mean_metric(metrics, "mfu"),
            "rollout_is_mean": is_metrics.get("rollout_is_mean"),
            "sequences": float(real_rows),
            "padding_rows": float(padding),
            # The padded share of verl's full forward (a packed forward pads only between prompt groups).
            "forward_padding": None
            if self.config.shared_prefix
            else padded_share(batch.attention_mask, micro_batch),
            "tokens": float(batch.response_mask.sum().item()),
            "step_time_s": time.perf_counter() - started,
            "old_log_prob_s": recompute_s,
            **entropy_measured,
            **{f"mismatch_{k}": v for k, v in mismatch.items()},
        }
        if on_policy:
            result |= measured_in_loss(
                metrics, batch.temperature, loss_config.rollout_is_threshold is not None
            )
        return {key: value for key, value in result.items() if value is not None}

    def full_state(self) -> dict[str, torch.Tensor]:
        """Full (unsharded) weights by HF name, on the CPU (the base's, under LoRA without merging)."""
        params, _ = self._worker.engine.get_per_tensor_param()
        return {name: tensor.detach().to("cpu", copy=True) for name, tensor in params}

    def save_checkpoint(self, out_dir: str | Path) -> Path:
        """The current policy as a Hugging Face directory (weights, config, the source's tokenizer files);
        under LoRA the adapter directory instead, pointing at `base_dir`."""
        out = Path(out_dir)
        self._write(out)
        return out
