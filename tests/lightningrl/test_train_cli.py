"""`lightningrl train --config x.toml`: fit from a TOML file (a command-line agent); flags override it."""

from __future__ import annotations

import asyncio
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from fit_agents import PROMPTS, subprocess_env

from lightningrl.cli import build_parser
from lightningrl.commands.train import settings_from
from lightningrl.demos.tinylm import build_tiny_model
from lightningstore import SqlStore

COMMAND_AGENT = Path(__file__).parent / "command_agent.py"


@pytest.mark.slow
def test_train_from_toml_with_a_flag_override(tmp_path: Path) -> None:
    build_tiny_model(
        tmp_path / "model", seed=0, tokenizer_kind="word", extra_text=PROMPTS, hidden_size=32, num_layers=1
    )
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    (tmp_path / "train.toml").write_text(
        f"""
command = ["{sys.executable}", "{COMMAND_AGENT}"]
train = "train.jsonl"
model = "model"
workers = 3
runner_processes = 1
output_dir = "run"

[sampling_by_mode.val]
temperature = 0.3

[config]
steps = 1
tasks_per_step = 1
rollouts_per_task = 3

[config.trainer]
lr = 1e-3
"""
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lightningrl.cli",
            "train",
            "--config",
            str(tmp_path / "train.toml"),
            "--steps",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=subprocess_env(),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with (tmp_path / "run" / "metrics.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["step"]) for r in rows] == [1, 2]  # the flag's 2 steps, not the file's 1
    # not a terminal: one plain line per step
    lines = [line for line in done.stdout.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in lines] == ["1/2", "2/2"], done.stdout
    assert "done: step 2" in done.stdout
    latest = asyncio.run(_latest_llm(tmp_path / "run" / "store.db"))
    assert latest.resource.sampling_by_mode == {"val": {"temperature": 0.3}}
    # The user named val only: test mode (the gate's protected cases) stays greedy in a run fit starts.
    assert latest.resource.mode_sampling("test") == {"temperature": 0.0}
    assert latest.resource.mode_sampling("val") == {"temperature": 0.3}
    assert latest.resource.mode_sampling("train") == {"temperature": 1.0, "top_p": 1.0}


async def _latest_llm(db: Path):
    store = SqlStore(db)
    try:
        return await store.get_latest_version("llm")
    finally:
        await store.close()


def test_sampling_by_mode_flag_is_an_inline_table() -> None:
    parser = build_parser()
    args = parser.parse_args(["train", "--sampling_by_mode", "{val = {temperature = 1.0, top_p = 0.9}}"])
    top, _ = settings_from(args)
    assert top["sampling_by_mode"] == {"val": {"temperature": 1.0, "top_p": 0.9}}
    with pytest.raises(ValueError, match="sampling_by_mode must be a TOML inline table"):
        settings_from(parser.parse_args(["train", "--sampling_by_mode", "val.temperature=1"]))


def test_train_reports_bad_config_keys(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('agent = "m:f"\ntrain = "t.jsonl"\nmodel = "m"\n[config]\nstepz = 3\n')
    done = subprocess.run(
        [sys.executable, "-m", "lightningrl.cli", "train", "--config", str(tmp_path / "bad.toml")],
        capture_output=True,
        text=True,
        timeout=120,
        env=subprocess_env(),
    )
    assert done.returncode == 2
    assert "config.stepz" in done.stderr and "valid keys" in done.stderr


def test_algorithm_prompt_and_stage_tables_from_toml_and_flags(tmp_path: Path) -> None:
    (tmp_path / "chain.toml").write_text(
        'agent = "m:f"\ntrain = "t.jsonl"\nmodel = "m"\nalgorithm = ["apo", "rl"]\nprompt = "Q: {q}"\n'
        "[apo]\nrounds = 1\nbeam = 2\n[sft]\nsteps = 4\n[config]\nsteps = 2\n"
    )
    parser = build_parser()
    top, config = settings_from(parser.parse_args(["train", "--config", str(tmp_path / "chain.toml")]))
    assert top["algorithm"] == ["apo", "rl"] and top["prompt"] == "Q: {q}"
    assert top["apo"] == {"rounds": 1, "beam": 2} and top["sft"] == {"steps": 4} and config == {"steps": 2}
    flags = ["--config", str(tmp_path / "chain.toml"), "--algorithm", "sft,rl", "--sft", "{steps = 1}"]
    top, _ = settings_from(parser.parse_args(["train", *flags]))
    assert top["algorithm"] == ["sft", "rl"] and top["sft"] == {"steps": 1}
    with pytest.raises(ValueError, match="apo must be a TOML inline table"):
        settings_from(parser.parse_args(["train", "--apo", "rounds=2"]))
