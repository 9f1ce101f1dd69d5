"""The loop stops cleanly when its stop check (its own hook, or the release gate's `stop_reason`) names a reason."""

from __future__ import annotations

import asyncio
import csv
import io
import random
from pathlib import Path

import pytest
from openai import AsyncOpenAI
from rich.console import Console

from algorithm import Task
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.fitting.local_stack import local_stack
from lightningrl.release import gate_stop_check
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.loop import LightningRL
from lightningrl.rl.metrics import MetricsLog
from lightningstore import LLM, PromptTemplate, RewardIn, SqlStore
from lightningstore.gate import ProtectedCase, gate_records
from runner import Runner

PROMPTS = ["Pick a or b.", "Choose a or b."]
REASON = "protected case-x regresses, retry debt 6"  # a comma: the CSV must quote it


async def random_reward_agent(task: dict, resources) -> float:
    """One LLM call (so there is a sequence to train on); a random reward (so no group is all-equal)."""
    llm = resources.llm
    async with AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0) as client:
        await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=2
        )
    return random.random()


async def stop_at_step_two(rl: LightningRL) -> str | None:
    return REASON if rl.global_step == 2 else None


async def stop_always(rl: LightningRL) -> str | None:
    return "always"


@pytest.mark.slow
async def test_stop_check_ends_the_loop_after_its_step(tmp_path: Path) -> None:
    model = build_tiny_model(
        tmp_path / "model", seed=0, tokenizer_kind="word", extra_text=PROMPTS, hidden_size=32, num_heads=2
    )
    store = SqlStore(tmp_path / "store.db")
    tasks = [Task(task_id=f"t{i}", input={"prompt": p}) for i, p in enumerate(PROMPTS)]
    out = io.StringIO()
    async with local_stack(store, model, model_name="toy") as urls:
        root = await store.add_resource_version(
            "llm", LLM(endpoints=[urls.model_v1], model="toy", checkpoint=str(model))
        )
        runner = Runner(store, random_reward_agent, workers=4, proxy_url=urls.proxy, show_progress=False)
        runner_task = asyncio.create_task(runner.run())
        config = LightningRLConfig(
            steps=3,
            tasks_per_step=2,
            rollouts_per_task=2,
            val_every=3,  # would validate after step 3 only; the loop stops at step 2
            validate_first=False,
            output_dir=tmp_path / "run",
            show_progress=False,
        )
        rl = LightningRL(
            store, tasks, tasks, config, console=Console(file=out, width=200), stop_check=stop_at_step_two
        )
        metrics = await rl.run()
        assert rl.global_step == 2 and rl.stopped_reason == REASON
        assert [r["step"] for r in metrics.rows] == [1, 2]
        assert "stop/reason" not in metrics.rows[0]
        assert metrics.rows[1]["stop/reason"] == REASON and metrics.rows[1]["stop/stopped"] == 1
        assert all("val/success" not in r for r in metrics.rows)
        assert await store.query_rollouts(mode="val") == []  # no validation after stopping
        versions = await store.list_resource_versions("llm")
        assert versions[0].version_id == root.version_id and len(versions) == 3
        assert versions[-1].metadata["step"] == 2
        with (tmp_path / "run" / "metrics.csv").open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert [r["stop/reason"] for r in rows] == ["", REASON] and rows[1]["stop/stopped"] == "1"
        assert (tmp_path / "run" / "reward_curve.png").exists()
        assert "stopped after step 2" in out.getvalue() and REASON in out.getvalue()

        # continuous mode asks the hook after its step too
        outside = await rl.enqueue_tasks(tasks, n=2, resources_id=rl.resources_id, group_prefix="prod/")
        await rl.wait_for(outside, timeout=120)
        rl.stop_check = stop_always
        await rl.run_continuous(max_steps=3, min_rollouts=4, poll_interval=0.1, idle_timeout=5)
        runner.stop()
        await asyncio.wait_for(runner_task, timeout=60)

    assert rl.global_step == 3 and rl.stopped_reason == "always" and len(metrics.rows) == 3
    assert metrics.rows[-1]["continuous"] == 1 and metrics.rows[-1]["stop/reason"] == "always"
    await store.close()


async def test_the_gates_stop_reason_is_a_hook(tmp_path: Path) -> None:
    """The loop knows the release gate only through its hooks: `config.gate_stop` without the gate's stop
    check is refused by name (fit installs it), and the hook says why to stop."""
    store = SqlStore(tmp_path / "store.db")
    gate = gate_records(store)
    tasks = [Task(task_id="t0", input={})]
    config = LightningRLConfig(gate_stop=True, output_dir=tmp_path / "run", show_progress=False)
    with pytest.raises(ValueError, match="stop_check=lightningrl.release.gate_stop_check"):
        LightningRL(store, tasks, config=config)
    rl = LightningRL(store, tasks, config=config, stop_check=gate_stop_check)
    assert rl.stop_check is gate_stop_check
    assert LightningRL(store, tasks, config=LightningRLConfig(output_dir=tmp_path)).stop_check is None

    # the latest version scores lower than its parent on a protected case: the gate says stop
    case = ProtectedCase(resource_name="llm", case_id="case-p0", task_id="p0")
    await gate.put_protected_case(case, recorded_by="local:admin")
    parent = await store.add_resource_version("llm", PromptTemplate(template="parent"))
    latest = await store.add_resource_version(
        "llm", PromptTemplate(template="latest"), parent_id=parent.version_id
    )
    assert await rl.stop_check(rl) is None  # no evidence on the protected case yet
    for version, reward in ((parent, 1.0), (latest, 0.0)):
        resources = await store.add_resource_set({"llm": version.version_id})
        rollout = await store.enqueue_rollout(
            {"task_id": "p0"}, mode="test", resources_id=resources.resources_id, metadata={"task_id": "p0"}
        )
        attempt = await store.start_attempt(rollout.rollout_id)
        await store.add_reward(
            RewardIn(rollout_id=rollout.rollout_id, attempt_id=attempt.attempt_id, value=reward)
        )
        await store.update_attempt(rollout.rollout_id, attempt.attempt_id, status="succeeded")
    reason = await rl.stop_check(rl)
    assert reason is not None and "protected cases regress" in reason and "case-p0" in reason
    await store.close()


def test_metrics_log_keeps_a_string_column(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / "metrics.csv")
    log.log({"step": 1, "train/reward_mean": 0.5})
    log.log({"step": 2, "train/reward_mean": 0.75, "stop/stopped": 1, "stop/reason": 'a, "b"\nc'})
    with (tmp_path / "metrics.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["stop/reason"] for r in rows] == ["", 'a, "b"\nc']
    assert log.column("train/reward_mean") == [(1, 0.5), (2, 0.75)]
