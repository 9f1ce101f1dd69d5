"""`keep_checkpoints`: a run's old step checkpoints are deleted, newest kept, nothing else touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from lightningrl.config import LightningRLConfig
from lightningrl.rl.step_checkpoints import prune_step_checkpoints


def test_prune_keeps_the_newest_steps_by_number_and_leaves_other_entries(tmp_path: Path) -> None:
    for name in ("step-0001", "step-0002", "step-0010", "step-9999", "step-10000", "best", "step-0003.tmp"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "step-0004").write_text("a file, not a checkpoint")
    pruned = prune_step_checkpoints(tmp_path, keep=2)
    assert [p.name for p in pruned] == ["step-0001", "step-0002", "step-0010"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "best",
        "step-0003.tmp",
        "step-0004",
        "step-10000",
        "step-9999",
    ]
    assert prune_step_checkpoints(tmp_path, keep=2) == []
    assert prune_step_checkpoints(tmp_path / "absent", keep=1) == []


def test_keep_must_leave_the_newest(tmp_path: Path) -> None:
    (tmp_path / "step-0001").mkdir()
    with pytest.raises(ValueError, match="keep must be >= 1"):
        prune_step_checkpoints(tmp_path, keep=0)
    assert (tmp_path / "step-0001").is_dir()
    with pytest.raises(ValueError, match="keep_checkpoints must be >= 1 or None, got 0"):
        LightningRLConfig(keep_checkpoints=0)
