"""Train-inference mismatch: how far the trainer's log-probs of the sampled tokens are from the server's.

Measured before the update, on the tokens that are trained (response mask 1), with the trainer's
recomputed log-probs of the policy that sampled them. A system that takes the server's log-probs as
the old policy's trains on this gap; a large one means the two compute different distributions
(another dtype, another kernel, a stale weight sync).
"""

from __future__ import annotations

import torch

MISMATCH_KEYS = ("abs_mean", "abs_p99", "abs_max", "k3_kl", "tokens")


def logprob_mismatch(trainer: torch.Tensor, server: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Per-token |logp(server) - logp(trainer)| mean, p99 and max, and the k3 estimate of KL(server || trainer).

    k3 (Schulman): with r = p_trainer / p_server on tokens the server sampled, KL ~ mean((r - 1) - log r),
    non-negative per token and unbiased. All tensors (B, R); `mask` selects the tokens counted.
    """
    if trainer.shape != server.shape or trainer.shape != mask.shape:
        raise ValueError(
            f"trainer {tuple(trainer.shape)}, server {tuple(server.shape)} and mask {tuple(mask.shape)} must match"
        )
    keep = mask.bool()
    if not bool(keep.any()):
        return {"tokens": 0.0}
    log_ratio = (trainer.double() - server.double())[keep]
    gap = log_ratio.abs()
    k3 = torch.expm1(log_ratio) - log_ratio
    return {
        "abs_mean": float(gap.mean()),
        "abs_p99": float(torch.quantile(gap, 0.99)) if gap.numel() <= 16_000_000 else float(gap.max()),
        "abs_max": float(gap.max()),
        "k3_kl": float(k3.mean()),
        "tokens": float(gap.numel()),
    }
