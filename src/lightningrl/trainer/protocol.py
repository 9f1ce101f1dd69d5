"""Trainer: what the RL algorithm calls to update a policy, whatever runs underneath."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

import torch

from lightningrl.credit.batch import SequenceBatch


@runtime_checkable
class Trainer(Protocol):
    """An actor trainer: in-process verl today, a verl `RayPPOTrainer` fed from the store at scale."""

    def compute_log_probs(self, batch: SequenceBatch) -> torch.Tensor:
        """Current policy's log-prob of every response token, (B, R), 0 on padding."""
        ...

    def train_step(self, batch: SequenceBatch, advantages: torch.Tensor) -> dict[str, float]:
        """One policy update on `batch` with per-token `advantages` (B, R); returns metrics."""
        ...

    def save_checkpoint(self, out_dir: str | Path) -> Path:
        """Write the current policy as a Hugging Face model directory and return its path."""
        ...
