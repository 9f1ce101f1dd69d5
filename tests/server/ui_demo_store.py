"""A store filled by a short real training run, for the dashboard's browser tests and its docs screenshots.

A tiny model (built by `lightningrl.demos.tinylm`) is served by our inference server; an agent makes two model
calls through the proxy, calls one traced tool, rewards its first call and returns an episode reward;
LightningRL trains it for STEPS steps with verl, validating at the end. Then one rollout fails with a
traceback, and the gate files a receipt for the latest candidate and checks it (HOLD: no canary, no
approval).
"""

from __future__ import annotations

import asyncio
import io
import random
from dataclasses import dataclass
from pathlib import Path

from openai import AsyncOpenAI
from rich.console import Console

from algorithm import Task
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.fitting.local_stack import local_stack
from lightningrl.release import build_receipt, check_receipt
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.loop import LightningRL
from lightningrl.trainer.config import TrainerConfig
from lightningstore import LLM, SqlStore
from lightningstore.gate import gate_records
from runner import Runner, emit_reward, trace

PROMPTS = ["Pick a or b.", "Choose a or b.", "Say a or b."]
STEPS = 3
BOOM = "explode"


@trace(kind="tool")
def count_letters(text: str) -> int:
    """The agent's one tool."""
    return sum(ch.isalpha() for ch in text)


async def two_call_agent(task: dict, resources) -> float:
    """Ask, then ask again with the first answer; the first call is judged on its own (step 0)."""
    if task["prompt"] == BOOM:
        raise RuntimeError(f"the agent cannot handle {task['prompt']!r}")
    llm = resources.llm
    async with AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0) as client:
        messages = [{"role": "user", "content": task["prompt"]}]
        first = await client.chat.completions.create(model=llm.model, messages=messages, max_tokens=4)
        answer = first.choices[0].message.content or ""
        emit_reward(1.0 if "b" in answer else 0.0, name="first_call", step=0, primary=False)
        letters = count_letters(answer)
        messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "Sure?"}]
        second = await client.chat.completions.create(model=llm.model, messages=messages, max_tokens=4)
    # The jitter makes siblings always differ: no group is dropped, so every step publishes a version.
    return ((letters + len(second.choices[0].message.content or "")) % 7 + random.random()) / 7


@dataclass(frozen=True)
class DemoStore:
    db: Path
    metrics_csv: Path
    failed_rollout_id: str
    receipt_id: str
    steps: int


async def build_demo_store(root: Path, *, steps: int = STEPS) -> DemoStore:
    """Train for `steps` steps into `root/store.db`; the metrics go to `root/run/metrics.csv`."""
    model = build_tiny_model(
        root / "model",
        seed=0,
        tokenizer_kind="word",
        extra_text=[*PROMPTS, "Sure?"],
        hidden_size=32,
        num_layers=1,
        num_heads=2,
    )
    store = SqlStore(root / "store.db")
    tasks = [
        Task(task_id=f"t{i}", input={"prompt": p}, tags={"kind": f"k{i % 2}"}) for i, p in enumerate(PROMPTS)
    ]
    async with local_stack(store, model, model_name="tiny") as urls:
        await store.add_resource_version(
            "llm",
            LLM(
                endpoints=[urls.model_v1], model="tiny", checkpoint=str(model), sampling={"temperature": 1.0}
            ),
            created_by="demo",
            artifact=str(model),
        )
        runner = Runner(store, two_call_agent, workers=4, proxy_url=urls.proxy, show_progress=False)
        runner_task = asyncio.create_task(runner.run())
        config = LightningRLConfig(
            steps=steps,
            tasks_per_step=2,
            rollouts_per_task=3,
            val_every=steps,
            val_rollouts_per_task=1,
            output_dir=root / "run",
            trainer=TrainerConfig(lr=1e-3),
        )
        rl = LightningRL(store, tasks, tasks, config, console=Console(file=io.StringIO()))
        await rl.run()
        (failed, _), *_ = await rl.enqueue_tasks(
            [Task(task_id="boom", input={"prompt": BOOM})],
            n=1,
            resources_id=rl.resources_id,
            group_prefix="x/",
        )
        await rl.wait_for([(failed, _)], timeout=60)
        runner.stop()
        await asyncio.wait_for(runner_task, timeout=60)
    gate = gate_records(store)
    latest = await store.get_latest_version("llm")
    assert latest is not None
    receipt = await build_receipt(store, gate, latest.version_id, created_by="algorithm:demo")
    await check_receipt(store, gate, receipt.receipt_id, recorded_by="approver:demo")
    await store.close()
    return DemoStore(
        db=root / "store.db",
        metrics_csv=root / "run" / "metrics.csv",
        failed_rollout_id=failed.rollout_id,
        receipt_id=receipt.receipt_id,
        steps=steps,
    )
