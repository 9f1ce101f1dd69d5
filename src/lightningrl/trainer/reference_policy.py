"""The frozen reference policy of verl's KL loss: the checkpoint training started from."""

from __future__ import annotations

from pathlib import Path

import torch

from lightningrl.credit.batch import SequenceBatch
from lightningrl.models.adapter import load_causal_lm
from lightningrl.trainer.reference import response_log_probs


class ReferencePolicy:
    """A frozen Hugging Face copy of the starting checkpoint; gives `ref_log_prob` for verl's KL loss.

    verl's `RayPPOTrainer` asks a ref worker for the same numbers (`_compute_ref_log_prob`); here the
    model is small enough to sit beside the actor, and a plain forward computes what the worker would
    (the verl/torch parity test checks the two paths agree).
    """

    def __init__(self, model_dir: str | Path, device: str = "cpu") -> None:
        self.device = device
        # A LoRA adapter directory loads as its base with the adapter merged in.
        self.model = load_causal_lm(model_dir, dtype=torch.float32).to(device).eval()
        for parameter in self.model.parameters():
            parameter.requires_grad_(False)

    @torch.no_grad()
    def log_probs(self, batch: SequenceBatch) -> torch.Tensor:
        """log p_ref of every response token, (B, R), zero on padding."""
        return response_log_probs(self.model, batch.to(self.device)).cpu()
