"""One RL step of the real SmolLM2-135M-Instruct through `fit`: store server, proxy, our inference
server, a runner process and verl's actor, with the token accounting in the metrics."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from backends import LiveServer
from fit_agents import fruit_agent, subprocess_env
from playwright.sync_api import expect, sync_playwright
from safetensors import safe_open
from tracker_files import mlflow_runs, tensorboard_scalars, wandb_run

from lightningrl import fit
from lightningrl.models import cached_model
from lightningrl.processes.supervisor import child_env
from lightningrl.rl.metrics import MetricsLog
from lightningrl.rl.trackers import mlflow_name

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"
PROMPTS = ["Name a fruit.", "Name a colour.", "Name an animal.", "Name a city."]


@pytest.fixture(scope="module")
def smollm2() -> Path:
    return cached_model("smollm2")


def _tensor(checkpoint: Path, name: str):
    with safe_open(str(checkpoint / "model.safetensors"), framework="pt") as weights:
        return weights.get_tensor(name)


def _one_step(model: Path, out: Path, trackers: tuple[str, ...] = (), **trainer: object):
    return fit(
        fruit_agent,
        [{"prompt": p} for p in PROMPTS[:2]],
        model=model,
        config={
            "steps": 1,
            "tasks_per_step": 2,
            "rollouts_per_task": 4,
            "val_every": 0,
            "trainer": {"lr": 1e-4, "micro_batch_size": 8, **trainer},
            "show_progress": False,
        },
        workers=8,
        runner_processes=1,
        engine="ours",
        output_dir=out,
        trackers=trackers,
    )


@pytest.mark.slow
def test_one_rl_step_on_the_real_model(smollm2: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = _one_step(smollm2, out, trackers=("tensorboard", "mlflow", "wandb"))
    row = result.metrics[-1]
    assert row["step"] == 1 and "update/skipped" not in row, row
    assert row["credit/calls_used"] == 8 and row["credit/calls_logprob_mismatch"] == 0
    # The trainer's log-probs of the sampled tokens, before the update, equal the server's (fp32 both).
    assert row["tokens/mismatch_tokens"] > 8
    assert row["tokens/mismatch_abs_mean"] <= 1e-3, row
    assert 0.0 <= row["tokens/mismatch_k3_kl"] <= 1e-4
    assert row["tokens/mismatch_abs_max"] >= row["tokens/mismatch_abs_p99"] >= 0.0
    # One epoch, one mini-batch: the update starts on the policy that sampled, so its ratio is 1.
    assert abs(row["actor/ppo_kl"]) <= 1e-4, row
    # Plain chat requests: the server rendered the recorded messages with the chat template, exactly.
    assert row["tokens/drift_calls"] == 8 and row["tokens/prompt_drift"] == 0.0
    assert 0.0 <= row["tokens/response_drift"] <= 1.0
    assert "tokens/prefix_continuity" not in row  # one call a rollout: nothing to merge
    checkpoint = result.last_checkpoint
    assert checkpoint is not None and checkpoint != smollm2
    name = "model.layers.0.self_attn.q_proj.weight"
    changed = (_tensor(checkpoint, name) - _tensor(smollm2, name)).abs().max().item()
    assert changed > 0.0
    # The run in the team's trackers: every number of metrics.csv, per step, and the version it made.
    written = MetricsLog.resume(result.metrics_csv).rows
    scalars = tensorboard_scalars(out / "tensorboard")
    [mlflow] = mlflow_runs(out / "mlflow.db")
    wandb = wandb_run(out / "wandb")
    for csv_row in written:
        step = int(csv_row["step"])
        for key, value in csv_row.items():
            if key == "step" or isinstance(value, str) or not math.isfinite(value):
                continue
            assert scalars[key][step] == pytest.approx(value, rel=1e-6), key
            assert mlflow["metrics"][mlflow_name(key)][step] == pytest.approx(value, rel=1e-6), key
            assert wandb["history"][step][key] == pytest.approx(value, rel=1e-6), key
    assert wandb["history"][1]["update/version_id"] == result.final_version_id
    assert mlflow["tags"]["update/version_id"] == result.final_version_id
    assert mlflow["params"]["trainer.lr"] == "0.0001" and wandb["config"]["rollouts_per_task"] == 4
    # The stored run tells the same story to anyone with the store.
    store = str(out / "store.db")
    done = subprocess.run(
        [sys.executable, "-m", "lightningrl.cli", "report", "tokens", "--store", store],
        capture_output=True,
        text=True,
        timeout=120,
        env=subprocess_env(),
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].split()[:2] == ["version", "rollouts"] and len(lines) == 2, done.stdout
    cells = lines[1].split()
    assert cells[1] == "8" and cells[2] == "8" and cells[4] == "0.000", done.stdout
    assert float(cells[6]) == pytest.approx(row["tokens/mismatch_abs_mean"], rel=1e-2)
    # And the dashboard's Training page charts it (dev mode: no tokens), screenshot kept.
    live = LiveServer(
        store, out / "dashboard.log", extra_args=("--metrics-csv", str(result.metrics_csv)), env=child_env()
    ).start()
    try:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1360, "height": 900})
            page.goto(f"{live.url}/ui/training")
            expect(page.locator("#charts")).to_have_attribute("data-ready", "1")
            for key in ("tokens-mismatch", "tokens-kl", "tokens-drift"):
                expect(page.locator(f"#chart-{key} canvas")).to_have_count(1)
                expect(page.locator(f"#chart-{key}")).to_have_attribute("data-points", "1")
            page.screenshot(path=str(ARTIFACTS / "real-model-training.png"), full_page=True)
            browser.close()
    finally:
        live.stop()


@pytest.mark.slow
def test_one_lora_step_on_the_real_model(smollm2: Path, tmp_path: Path) -> None:
    result = _one_step(smollm2, tmp_path / "run", lora_rank=8, lr=1e-3)
    row = result.metrics[-1]
    assert "update/skipped" not in row, row
    assert row["tokens/mismatch_abs_mean"] <= 1e-3 and abs(row["actor/ppo_kl"]) <= 1e-4, row
    adapter = result.last_checkpoint
    assert adapter is not None and (adapter / "adapter_config.json").is_file()
    with safe_open(str(adapter / "adapter_model.safetensors"), framework="pt") as weights:
        lora_b = [weights.get_tensor(k) for k in weights.keys() if "lora_B" in k]
    # PEFT starts every B at zero: a nonzero B is the update, applied on top of the untouched base.
    assert lora_b and max(t.abs().max().item() for t in lora_b) > 0.0
