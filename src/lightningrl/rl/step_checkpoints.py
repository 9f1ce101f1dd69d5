"""A run's step checkpoints: where step N's goes, and pruning all but the newest
(`LightningRLConfig.keep_checkpoints`)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

_PREFIX = "step-"
_STEP = re.compile(rf"{_PREFIX}\d+")


def checkpoints_dir(output_dir: Path) -> Path:
    """The directory holding a run's step checkpoints."""
    return output_dir / "checkpoints"


def step_checkpoint(output_dir: Path, step: int) -> Path:
    """Where the checkpoint trained at `step` goes."""
    return checkpoints_dir(output_dir) / f"{_PREFIX}{step:04d}"


def prune_step_checkpoints(directory: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` step checkpoints under `directory`; returns those deleted.
    Other entries are left alone (a user's own files, a half-written directory of another name)."""
    if keep < 1:
        raise ValueError(
            f"keep must be >= 1 (the newest checkpoint is the model being trained), got {keep!r}"
        )
    if not directory.is_dir():
        return []
    steps = sorted(
        (p for p in directory.iterdir() if p.is_dir() and _STEP.fullmatch(p.name)),
        key=lambda p: int(p.name.removeprefix(_PREFIX)),
    )
    doomed = steps[:-keep]
    for path in doomed:
        shutil.rmtree(path)
    return doomed
