"""`lightningrl eval` / `evaluate`: success per slice with Wilson intervals and pass@k, a JSON report,
rollouts in the store, and the same number as fit's validation on the same model and rows."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from engine_stack import serve
from fit_agents import PROMPTS, subprocess_env

from algorithm import RolloutOutcome, Task
from lightningrl import ServedModel, evaluate, fit
from lightningrl.credit.calls import is_llm_span
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.evaluation import eval_report, pass_at, wilson_interval
from lightningrl.serving import create_app
from lightningstore import Rollout, RolloutConfig, RolloutMode, RolloutStatus, SqlStore

# Rows whose reward the row itself names (fit_agents.scripted_agent): plus 2 of 3, minus 1 of 3.
ROWS = [
    {"prompt": PROMPTS[i % 3], "op": op, "reward": reward, "n": i}
    for i, (op, reward) in enumerate(
        [("plus", 1), ("plus", 1), ("plus", 0), ("minus", 1), ("minus", 0), ("minus", 0)]
    )
]


def test_wilson_intervals_and_unbiased_pass_at_k() -> None:
    low, high = wilson_interval(8, 10)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert wilson_interval(0, 0) == (0.0, 1.0) and wilson_interval(5, 5)[1] == 1.0
    assert pass_at(4, 1, 1) == pytest.approx(0.25) and pass_at(4, 1, 4) == 1.0 and pass_at(4, 0, 2) == 0.0
    assert pass_at(4, 2, 2) == pytest.approx(1 - math.comb(2, 2) / math.comb(4, 2))


def test_the_report_counts_rollouts_tasks_and_slices() -> None:
    def outcome(
        task: Task, reward: float | None, status: RolloutStatus = RolloutStatus.SUCCEEDED
    ) -> RolloutOutcome:
        rollout = Rollout(
            rollout_id="r",
            input={},
            mode=RolloutMode.VAL,
            status=status,
            config=RolloutConfig(),
            enqueue_time=0.0,
        )
        return RolloutOutcome(rollout=rollout, task=task, reward=reward)

    a = Task(task_id="a", input={}, tags={"op": "plus"})
    b = Task(task_id="b", input={}, tags={"op": "minus"})
    outcomes = [outcome(a, 1.0), outcome(a, 0.0), outcome(b, 0.0), outcome(b, None, RolloutStatus.FAILED)]
    report = eval_report(outcomes, k=2, success_threshold=1.0, version_id="v", resources_id="rs", mode="val")
    assert (report.overall.successes, report.overall.rollouts, report.overall.tasks) == (1, 4, 2)
    assert report.pass_at_k == {1: pytest.approx(0.25), 2: pytest.approx(0.5)} and report.failed_rollouts == 1
    assert report.slices["op=plus"].success == 0.5 and report.slices["op=minus"].success == 0.0
    assert json.loads(json.dumps(report.as_json()))["pass_at_k"]["2"] == pytest.approx(0.5)
    assert "op=plus" in report.table() and "pass@2 0.500" in report.table()


@pytest.mark.slow
def test_eval_gives_fits_validation_number_and_a_report(tmp_path: Path) -> None:
    model = build_tiny_model(tmp_path / "model", seed=0, hidden_size=32, num_heads=2)
    run = fit(
        "fit_agents:scripted_agent",
        ROWS,
        ROWS,
        model=model,
        config={"steps": 1, "tasks_per_step": 2, "rollouts_per_task": 2, "val_every": 1, "balance_by": "op",
                "show_progress": False, "max_fill_rounds": 0},
        workers=4,
        runner_processes=1,
        output_dir=tmp_path / "run",
    )  # fmt: skip
    after = run.metrics[-1]
    db = tmp_path / "run" / "store.db"

    async def approve() -> None:
        store = SqlStore(db)
        try:
            await store.move_pointer("llm", "approved", run.final_version_id, actor="test")
        finally:
            await store.close()

    asyncio.run(approve())
    rows_file = tmp_path / "rows.jsonl"
    rows_file.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    done = subprocess.run(
        [sys.executable, "-m", "lightningrl.cli", "eval", "--agent", "fit_agents:scripted_agent",
         "--rows", str(rows_file), "--store", str(db), "--version", "approved", "--slice-by", "op",
         "-k", "2", "--workers", "4", "--runner-processes", "1", "--output-dir", str(tmp_path / "eval")],
        capture_output=True, text=True, timeout=600, env=subprocess_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "eval" / "eval.json").read_text())
    # The store's approved version, the one fit validated last: the same success, overall and per slice.
    assert (
        report["source"]["version_id"] == run.final_version_id and report["source"]["pointer"] == "approved"
    )
    assert report["overall"]["success"] == pytest.approx(after["val/success"]) == pytest.approx(0.5)
    assert report["slices"]["op=plus"]["success"] == pytest.approx(after["val/success[op=plus]"])
    assert report["slices"]["op=minus"]["success"] == pytest.approx(1 / 3)
    assert (
        report["overall"]["rollouts"] == 12
        and report["k"] == 2
        and report["pass_at_k"]["1"] == pytest.approx(0.5)
    )
    assert "op=minus" in done.stdout and f"report: {tmp_path / 'eval' / 'eval.json'}" in done.stdout

    # A model served elsewhere (here our own inference server stands in for a vendor's OpenAI-compatible
    # API), evaluated through the proxy; the rows a Hugging Face split read from the same file.
    import datasets

    split = datasets.load_dataset("json", data_files=str(rows_file), split="train")
    vendor = serve(create_app(model, device="cpu", served_model_name="vendor-model", cpu_threads=1), "vendor")
    try:
        report = evaluate("fit_agents:scripted_agent", split, model=ServedModel(f"{vendor.url}/v1", "vendor-model"),
                          k=1, slice_by="op", output_dir=tmp_path / "eval2", workers=4, runner_processes=1)  # fmt: skip
    finally:
        vendor.stop()
    assert report.overall.success == pytest.approx(0.5) and report.overall.tasks == 6
    assert report.source == {"base_url": f"{vendor.url}/v1", "model": "vendor-model"}

    async def count() -> tuple[int, int]:
        store = SqlStore(tmp_path / "eval2" / "store.db")
        try:
            rollouts = await store.query_rollouts(mode=RolloutMode.VAL)
            spans = [s for r in rollouts for s in await store.query_spans(r.rollout_id) if is_llm_span(s)]
            return len(rollouts), len(spans)
        finally:
            await store.close()

    assert asyncio.run(count()) == (6, 6)  # every call recorded


def test_a_served_model_behind_an_api_key_is_evaluated_and_no_agent_sees_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vendor endpoint that wants an API key (our inference server with one stands in): the gateway
    sends the key named by `ServedModel.api_key_env`; the runners, so the agents, never get it."""
    import hashlib

    import httpx

    from lightningstore import LLM
    from lightningstore.proxy.errors import ProxyError
    from lightningstore.proxy.upstream import upstream_key

    key = "vendor-key-" + "7" * 24
    monkeypatch.setenv("VENDOR_KEY", key)
    model = build_tiny_model(tmp_path / "model", seed=0, hidden_size=32, num_heads=2)
    rows = [
        {"prompt": p, "key_env": "VENDOR_KEY", "key_sha256": hashlib.sha256(key.encode()).hexdigest()}
        for p in PROMPTS[:3]
    ]
    app = create_app(model, device="cpu", served_model_name="vendor-model", cpu_threads=1, api_key=key)
    vendor = serve(app, "vendor")
    try:
        body = {"model": "vendor-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        refused = httpx.post(f"{vendor.url}/v1/chat/completions", json=body, timeout=30)
        assert refused.status_code == 401 and "API key" in refused.text  # the vendor wants its key
        report = evaluate("fit_agents:key_blind_agent", rows, model=ServedModel(f"{vendor.url}/v1", "vendor-model",
                          api_key_env="VENDOR_KEY"), k=1, output_dir=tmp_path / "eval", workers=3,
                          runner_processes=1)  # fmt: skip
    finally:
        vendor.stop()
    # Every call went through with the key, and no agent found it in its environment.
    assert report.overall.tasks == 3 and report.overall.success == pytest.approx(1.0), report.overall
    # A gateway without the variable says which one it lacks.
    monkeypatch.delenv("VENDOR_KEY")
    with pytest.raises(ProxyError, match=r"no \$VENDOR_KEY in its environment"):
        upstream_key(LLM(endpoints=["http://127.0.0.1:1/v1"], model="m", api_key_env="VENDOR_KEY"))
    with pytest.raises(ValueError, match="api_key_env"):
        LLM(endpoints=["http://127.0.0.1:1/v1"], model="m", api_key_env="NOT A NAME")
