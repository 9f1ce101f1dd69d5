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


ON_POLICY = "lightningrl_on_policy"
"""Meta key of a verl batch: the step is on-policy (one epoch, one mini-batch), its old log-probs are
the training forward's own."""
ROLLOUT_LOG_PROBS = "rollout_log_probs"
DECISION_MASK = "decision_mask"
MEASURED = "lightningrl/"
"""Prefix of the sums the loss returns for the trainer to turn into means (entropy, mismatch, IS)."""


def ppo_loss_own_old_log_probs(
    config: Any, model_output: dict[str, Any], data: Any, dp_group: Any = None, *, is_threshold: float | None
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl's `ppo_loss`; on an on-policy step (meta `ON_POLICY`) the old log-probs are this forward's
    own, detached — the PPO ratio is 1 by construction, so no separate pass computes them — and what
    that pass measured comes from here: the TIS weights against the rollout's log-probs, the entropy
    (no gradient through it unless `entropy_coeff`), the train-inference mismatch (sums and counts,
    `MEASURED`; the trainer divides)."""
    from verl.utils import tensordict_utils as tu
    from verl.utils.metric import AggregationType, Metric
    from verl.workers.utils.losses import ppo_loss
    from verl.workers.utils.padding import no_padding_2_padding

    if not tu.get_non_tensor_data(data=data, key=ON_POLICY, default=False):
        return ppo_loss(config, model_output, data, dp_group)
    current = no_padding_2_padding(model_output["log_probs"], data).detach().float()
    mask = data["response_mask"].to(current.dtype)
    rollout = data[ROLLOUT_LOG_PROBS].float()
    data["old_log_probs"] = current
    measured: dict[str, float] = {}
    if is_threshold is not None:
        weights, _ = truncated_is_weights(current, rollout, mask, is_threshold)
        data["rollout_is_weights"] = weights
        measured["is_weight_sum"] = float((weights * mask).sum())
    entropy = model_output.get("entropy")
    if entropy is not None:
        per_token = no_padding_2_padding(entropy, data).detach().float()
        decisions = data[DECISION_MASK].to(current.dtype) * mask
        measured |= {
            "entropy_sum": float((per_token * mask).sum()),
            "entropy_decision_sum": float((per_token * decisions).sum()),
            "decision_tokens": float(decisions.sum()),
        }
        if not config.entropy_coeff:  # a measurement only: nothing flows back through it
            model_output = {k: v for k, v in model_output.items() if k != "entropy"}
    keep = mask.bool()
    log_ratio = (current.double() - rollout.double())[keep]
    measured |= {
        "tokens": float(keep.sum()),
        "mismatch_abs_sum": float(log_ratio.abs().sum()),
        "mismatch_k3_sum": float((torch.expm1(log_ratio) - log_ratio).sum()),
    }
    loss, metrics = ppo_loss(config, model_output, data, dp_group)
    metrics.update(
        {MEASURED + k: Metric(value=v, aggregation=AggregationType.SUM) for k, v in measured.items()}
    )
    if log_ratio.numel():
        # Max over micro-batches of each one's largest gap and its 99th percentile (an exact p99 needs
        # every token at once).
        gap = log_ratio.abs()
        metrics[MEASURED + "mismatch_abs_max"] = Metric(
            value=float(gap.max()), aggregation=AggregationType.MAX
        )
        metrics[MEASURED + "mismatch_abs_p99"] = Metric(
            value=float(torch.quantile(gap, 0.99)), aggregation=AggregationType.MAX
        )
    return loss, metrics


def _reduced(value: Any, how: Any) -> float:
    """One number from a verl metric that arrives reduced or as a list per micro-batch."""
    if isinstance(value, list | tuple):
        return float(how(float(v) for v in value))
    return float(value)


def measured_in_loss(metrics: dict[str, Any], temperature: float, is_correction: bool) -> dict[str, float]:
    """The trainer's step metrics from the sums `ppo_loss_own_old_log_probs` returned: `entropy` and
    `entropy_decision` (means over trained and first-of-call tokens), `rollout_is_mean`, and the
    train-inference mismatch (only at temperature 1: the server's log-probs are temperature-1 ones)."""
    got = {k[len(MEASURED) :]: v for k, v in metrics.items() if k.startswith(MEASURED)}
    total = {k: _reduced(v, max if k.endswith(("_max", "_p99")) else sum) for k, v in got.items()}
    tokens = total.get("tokens", 0.0)
    if not tokens:
        return {}
    out: dict[str, float] = {}
    if "entropy_sum" in total:
        out["entropy"] = total["entropy_sum"] / tokens
        if total.get("decision_tokens"):
            out["entropy_decision"] = total["entropy_decision_sum"] / total["decision_tokens"]
    if is_correction and "is_weight_sum" in total:
        out["rollout_is_mean"] = total["is_weight_sum"] / tokens
    if temperature == 1.0:
        out |= {
            "mismatch_abs_mean": total["mismatch_abs_sum"] / tokens,
            "mismatch_abs_p99": total["mismatch_abs_p99"],
            "mismatch_abs_max": total["mismatch_abs_max"],
            "mismatch_k3_kl": total["mismatch_k3_sum"] / tokens,
            "mismatch_tokens": tokens,
        }
    return out
