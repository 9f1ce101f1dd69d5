"""Pruning a run's step checkpoints (`LightningRLConfig.keep_checkpoints`)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

_STEP = re.compile(r"step-\d+")


def prune_step_checkpoints(directory: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` `step-NNNN` directories under `directory`; returns those deleted.
    Other entries are left alone (a user's own files, a half-written directory of another name)."""
    if keep < 1:
        raise ValueError(
            f"keep must be >= 1 (the newest checkpoint is the model being trained), got {keep!r}"
        )
    if not directory.is_dir():
        return []
    steps = sorted(
        (p for p in directory.iterdir() if p.is_dir() and _STEP.fullmatch(p.name)),
        key=lambda p: int(p.name.removeprefix("step-")),
    )
    doomed = steps[:-keep]
    for path in doomed:
        shutil.rmtree(path)
    return doomed
