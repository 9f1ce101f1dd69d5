"""The PPO-clip policy loss with truncated importance sampling, from verl: what the trainer minimizes.

The maths is verl's (`verl.trainer.ppo.core_algos`, `rollout_corr_helper`); the advantages it weighs
come from `lightningrl.rl.advantages`. verl is imported lazily: it costs seconds and `import lightningrl`
must stay cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class PolicyLossConfig:
    """PPO-clip (dual-clip) policy loss and truncated importance sampling against rollout logprobs."""

    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
    clip_ratio_c: float = 3.0
    loss_agg_mode: str = "token-mean"
    entropy_coeff: float = 0.0
    rollout_is_threshold: float | None = 2.0
    """Cap of the token-level weight pi_train / pi_rollout (TIS); None trains without the correction."""
    kl_loss_coef: float = 0.0
    """Weight of verl's KL loss to the reference policy (the checkpoint training started from); 0 is off.
    It anchors tokens the reward says nothing about (e.g. an answer that must copy a tool's result)."""
    kl_loss_type: str = "low_var_kl"
    """verl's `kl_penalty` estimator: "kl" (k1), "abs", "mse" (k2), "low_var_kl" (k3)."""

    def __post_init__(self) -> None:
        if self.kl_loss_coef < 0:
            raise ValueError(f"kl_loss_coef must be >= 0, got {self.kl_loss_coef!r}")


def actor_loss_fields(config: PolicyLossConfig) -> dict[str, Any]:
    """The verl `ActorConfig` fields that carry this loss configuration."""
    return {
        "clip_ratio": config.clip_ratio_low,
        "clip_ratio_low": config.clip_ratio_low,
        "clip_ratio_high": config.clip_ratio_high,
        "clip_ratio_c": config.clip_ratio_c,
        "loss_agg_mode": config.loss_agg_mode,
        "entropy_coeff": config.entropy_coeff,
        "use_kl_loss": config.kl_loss_coef > 0,
        "kl_loss_coef": config.kl_loss_coef,
        "kl_loss_type": config.kl_loss_type,
    }


def truncated_is_weights(
    old_log_probs: torch.Tensor,
    rollout_log_probs: torch.Tensor,
    response_mask: torch.Tensor,
    threshold: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-level TIS weights min(pi_train / pi_rollout, threshold), zero on masked tokens (verl's)."""
    from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_weights

    return compute_rollout_correction_weights(
        log_ratio=old_log_probs - rollout_log_probs,
        response_mask=response_mask,
        rollout_is="token",
        rollout_is_threshold=threshold,
    )


def policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: PolicyLossConfig,
    rollout_is_weights: torch.Tensor | None = None,
    global_batch_size: int | None = None,
    batch_num_tokens: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """verl's PPO-clip loss (`vanilla` policy loss, `agg_loss`) over (B, R) tensors, plus metrics."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.workers.config import ActorConfig

    actor = ActorConfig(
        strategy="fsdp2", rollout_n=1, ppo_micro_batch_size_per_gpu=1, **actor_loss_fields(config)
    )
    actor.global_batch_info.update(
        dp_size=1,
        batch_num_tokens=batch_num_tokens,
        global_batch_size=global_batch_size,
        loss_scale_factor=None,
    )
    loss, metrics = get_policy_loss_fn("vanilla")(
        old_log_prob=old_log_probs,
        log_prob=log_probs,
        advantages=advantages,
        response_mask=response_mask.bool(),
        loss_agg_mode=config.loss_agg_mode,
        config=actor,
        rollout_is_weights=rollout_is_weights,
    )
    return loss, dict(metrics)
