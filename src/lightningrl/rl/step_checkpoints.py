"""A run's step checkpoints: where step N's goes, pruning all but the newest and the protected ones
(`LightningRLConfig.keep_checkpoints`), and a clear error before a checkpoint would fill the disk."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lightningstore import LightningStore

_PREFIX = "step-"
_STEP = re.compile(rf"{_PREFIX}\d+")


def checkpoints_dir(output_dir: Path) -> Path:
    """The directory holding a run's step checkpoints."""
    return output_dir / "checkpoints"


def step_checkpoint(output_dir: Path, step: int) -> Path:
    """Where the checkpoint trained at `step` goes."""
    return checkpoints_dir(output_dir) / f"{_PREFIX}{step:04d}"


def prune_step_checkpoints(directory: Path, keep: int, protect: Iterable[Path] = ()) -> list[Path]:
    """Delete all but the newest `keep` step checkpoints under `directory` and those in `protect` (e.g.
    the approved version's, the best validated one's); returns those deleted. Other entries are left
    alone (a user's own files, a half-written directory of another name)."""
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
    kept = {p.resolve() for p in protect}
    doomed = [p for p in steps[:-keep] if p.resolve() not in kept]
    for path in doomed:
        shutil.rmtree(path)
    return doomed


def directory_bytes(path: Path) -> int:
    """Bytes of the files under `path` (0 when it does not exist)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def check_disk_for_checkpoint(output_dir: Path, size: int, keep: int | None) -> None:
    """Raise before saving a checkpoint of about `size` bytes where the disk has less than that free
    (and a 10% margin): a full disk mid-write leaves a broken checkpoint and a dead run."""
    where = output_dir if output_dir.exists() else next(p for p in output_dir.parents if p.exists())
    free = shutil.disk_usage(where).free
    if free >= size * 1.1:
        return
    advice = (
        f"lower keep_checkpoints (now {keep})"
        if keep is not None
        else "set keep_checkpoints (now None: every step's is kept)"
    )
    raise OSError(
        f"not enough disk for the next step checkpoint: {free / 1e9:.2f} GB free under {where}, a "
        f"checkpoint takes ~{size / 1e9:.2f} GB; free some space or {advice}, then run the same "
        "command again to resume"
    )


async def protected_checkpoints(
    store: LightningStore, resource_name: str, rows: Sequence[Mapping[str, Any]], output_dir: Path
) -> list[Path]:
    """Checkpoints pruning never deletes: the `approved` version's, and the best validated step's
    (highest `val/success` in the metrics `rows`, the newer on a tie)."""
    protected: list[Path] = []
    approved = await store.get_pointer(resource_name, "approved")
    if approved is not None and getattr(approved.resource, "checkpoint", None):
        protected.append(Path(approved.resource.checkpoint))
    validated = [r for r in rows if int(r.get("step", 0)) > 0 and "val/success" in r]
    if validated:
        best = max(validated, key=lambda r: (float(r["val/success"]), int(r["step"])))
        protected.append(step_checkpoint(output_dir, int(best["step"])))
    return protected
