"""The policy's entropy over a batch's trained response tokens, and at each call's first token.

The first token of an LLM call is where the agent's choice shows first (which tool, which answer):
its entropy falling to ~0 while the mean stays up says the choice collapsed, not the wording.
"""

from __future__ import annotations

import torch


def first_call_tokens(call_ids: torch.Tensor) -> torch.Tensor:
    """(B, R) bool: each LLM call's first response token. A call's tokens are one contiguous run of its
    index in `call_ids` (-1 off-call: prompts of later calls, padding)."""
    before = torch.cat([call_ids.new_full((call_ids.shape[0], 1), -1), call_ids[:, :-1]], dim=1)
    return (call_ids >= 0) & (call_ids != before)


def entropy_stats(
    entropy: torch.Tensor, response_mask: torch.Tensor, call_ids: torch.Tensor
) -> dict[str, float]:
    """`entropy`: the mean over trained tokens (verl's token-mean of its `entropys`); `entropy_decision`:
    the mean over each call's first trained token. Empty when no token is trained."""
    trained = response_mask > 0
    if not bool(trained.any()):
        return {}
    stats = {"entropy": float(entropy[trained].float().mean())}
    decisions = first_call_tokens(call_ids) & trained
    if bool(decisions.any()):
        stats["entropy_decision"] = float(entropy[decisions].float().mean())
    return stats
