"""examples/calc/replay_update.py: replaying step 1 of a finished demo run reproduces its checkpoint."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import CALC_SMALL, REPO_ROOT, example_env
from safetensors.torch import load_file


def test_replaying_step_one_gives_the_runs_own_checkpoint(calc_experiment: Path, tmp_path: Path) -> None:
    seed_dir = calc_experiment / "calc" / "seed0"
    assert (seed_dir / "checkpoints" / "step-0001").is_dir(), "the demo's step 1 trained nothing"
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / "calc" / "replay_update.py"), *CALC_SMALL]
        + ["--run", str(seed_dir), "--save", str(tmp_path / "replayed")],
        capture_output=True,
        text=True,
        env=example_env(),
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "step 1:" in out and "P(right tool) / P(no tool)" in out
    assert "Loading weights" not in out + done.stderr  # no third-party progress bar between its lines
    for op in ("plus", "minus", "times"):
        assert out.count(f"{op} ") >= 2, out  # before and after
    ran = load_file(seed_dir / "checkpoints" / "step-0001" / "model.safetensors")
    replayed = load_file(tmp_path / "replayed" / "model.safetensors")
    warm = load_file(seed_dir / "model-warmup" / "model.safetensors")
    assert ran.keys() == replayed.keys()
    assert any(not ran[k].equal(warm[k]) for k in ran), "the step changed no weight"
    for name in ran:
        assert ran[name].equal(replayed[name]), name
