"""examples/calc/replay_update.py: replaying step 1 of a finished demo run reproduces its checkpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO_ROOT
from safetensors.torch import load_file

# Seeded rollouts; a warm-up long enough for the format (~150 steps at this size): step 1 trains.
SMALL = [
    "--seed",
    "3",
    "--deterministic",
    "--steps",
    "1",
    "--tasks-per-step",
    "6",
    "--n",
    "4",
    "--workers",
    "8",
]
SMALL += ["--warmup-steps", "220", "--warmup-until-loss", "100"]


# An in-process trainer of an earlier test (fit) leaves its torch.distributed rendezvous in this
# process's environment; a child inheriting it would join that process group instead of its own.
RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")


def run(script: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in RENDEZVOUS}
    env |= {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / "calc" / script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_replaying_step_one_gives_the_runs_own_checkpoint(tmp_path: Path) -> None:
    run("demo.py", *SMALL, "--output", str(tmp_path / "runs"))
    seed_dir = tmp_path / "runs" / "seed3"
    assert (seed_dir / "checkpoints" / "step-0001").is_dir(), "the demo's step 1 trained nothing"
    out = run("replay_update.py", *SMALL, "--run", str(seed_dir), "--save", str(tmp_path / "replayed"))
    assert "step 1:" in out and "P(right tool) / P(no tool)" in out
    for op in ("plus", "minus", "times"):
        assert out.count(f"{op} ") >= 2, out  # before and after
    ran = load_file(seed_dir / "checkpoints" / "step-0001" / "model.safetensors")
    replayed = load_file(tmp_path / "replayed" / "model.safetensors")
    warm = load_file(seed_dir / "model-warmup" / "model.safetensors")
    assert ran.keys() == replayed.keys()
    assert any(not ran[k].equal(warm[k]) for k in ran), "the step changed no weight"
    for name in ran:
        assert ran[name].equal(replayed[name]), name
