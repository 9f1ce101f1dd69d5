"""`keep_checkpoints`: a run's old step checkpoints are deleted, newest kept, nothing else touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from lightningrl.rl import step_checkpoints
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.step_checkpoints import (
    check_disk_for_checkpoint,
    directory_bytes,
    protected_checkpoints,
    prune_step_checkpoints,
    step_checkpoint,
)
from lightningstore import LLM, SqlStore


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


def test_protected_checkpoints_survive_pruning(tmp_path: Path) -> None:
    for step in range(1, 7):
        (tmp_path / f"step-{step:04d}").mkdir()
    pruned = prune_step_checkpoints(
        tmp_path, keep=2, protect=[tmp_path / "step-0002", tmp_path / "step-0004"]
    )
    assert [p.name for p in pruned] == ["step-0001", "step-0003"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-0002", "step-0004", "step-0005", "step-0006"]


async def test_the_approved_and_the_best_validated_checkpoints_are_protected(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    out = tmp_path / "run"
    try:
        assert await protected_checkpoints(store, "llm", [], out) == []
        version = await store.add_resource_version(
            "llm",
            LLM(endpoints=["http://127.0.0.1:1/v1"], model="m", checkpoint=str(step_checkpoint(out, 2))),
        )
        await store.move_pointer("llm", "approved", version.version_id, actor="test")
        rows = [
            {"step": 0, "val/success": 0.9},  # the start model: not a step checkpoint
            {"step": 1, "val/success": 0.5},
            {"step": 3, "val/success": 0.7},
            {"step": 4, "train/reward_mean": 1.0},
            {"step": 5, "val/success": 0.7},  # a tie: the newer
        ]
        assert await protected_checkpoints(store, "llm", rows, out) == [
            step_checkpoint(out, 2),
            step_checkpoint(out, 5),
        ]
    finally:
        await store.close()


def test_a_checkpoint_that_would_fill_the_disk_is_refused_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "step-0001").mkdir()
    (tmp_path / "step-0001" / "model.safetensors").write_bytes(b"w" * 1000)
    size = directory_bytes(tmp_path / "step-0001")
    assert size == 1000 and directory_bytes(tmp_path / "absent") == 0
    check_disk_for_checkpoint(tmp_path, size, keep=3)  # this disk has room for 1 kB

    class Usage:
        total, used, free = 10**9, 10**9 - 1050, 1050

    # A full disk cannot be made in a test: the free space is what the OS would report for one.
    monkeypatch.setattr(step_checkpoints.shutil, "disk_usage", lambda path: Usage)
    with pytest.raises(OSError, match=r"0\.00 GB free under .*lower keep_checkpoints \(now 3\)"):
        check_disk_for_checkpoint(tmp_path, size, keep=3)
    with pytest.raises(OSError, match=r"set keep_checkpoints \(now None"):
        check_disk_for_checkpoint(tmp_path / "not-yet", size, keep=None)
    assert LightningRLConfig().keep_checkpoints == 3
