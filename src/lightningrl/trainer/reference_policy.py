"""The frozen reference policy of verl's KL loss: the checkpoint training started from."""

from __future__ import annotations

from pathlib import Path

import torch

from lightningrl.credit.batch import SequenceBatch
from lightningrl.models.adapter import load_causal_lm
from lightningrl.trainer.shared_prefix import packed_response_log_probs


class ReferencePolicy:
    """A frozen Hugging Face copy of the starting checkpoint; gives `ref_log_prob` for verl's KL loss.

    verl's `RayPPOTrainer` asks a ref worker for the same numbers (`_compute_ref_log_prob`); here the
    model is small enough to sit beside the actor, and a packed forward (`shared_prefix`: each prompt
    once) computes what the worker would (the KL of the first step is 0: the same numbers as the actor's).
    """

    def __init__(
        self, model_dir: str | Path, device: str = "cpu", dtype: str = "fp32", rows_per_forward: int = 8
    ) -> None:
        """`rows_per_forward`: the actor's micro-batch (each prompt packed once with its responses).
        `dtype` is the actor's compute dtype ("fp32" or "bf16"): the KL then measures how far training
        moved the policy, not the two precisions' rounding (bf16 against fp32 is 2e-3-1e-2 nats a token)."""
        self.device = device
        self.rows_per_forward = rows_per_forward
        # A LoRA adapter directory loads as its base with the adapter merged in.
        torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}.get(dtype)
        if torch_dtype is None:
            raise ValueError(f"reference dtype must be 'fp32' or 'bf16', got {dtype!r}")
        self.model = load_causal_lm(model_dir, dtype=torch_dtype).to(device).eval()
        for parameter in self.model.parameters():
            parameter.requires_grad_(False)

    @torch.no_grad()
    def log_probs(self, batch: SequenceBatch) -> torch.Tensor:
        """log p_ref of every response token, (B, R), zero on padding."""
        return packed_response_log_probs(self.model, batch, self.rows_per_forward)
