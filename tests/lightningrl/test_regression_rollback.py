"""`rollback_on_regression` on the real stack: a held-out fall moves `latest` back to the best validated
version, and training goes on from it (its weights, its servers), not from the regressed one."""

from __future__ import annotations

import asyncio
import io
import random
from pathlib import Path
from typing import Any

import pytest
import torch
from openai import AsyncOpenAI
from rich.console import Console
from transformers import AutoModelForCausalLM

from algorithm import Task
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.fitting.local_stack import local_stack
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.loop import LightningRL
from lightningstore import LLM, SqlStore
from runner import Runner

PROMPTS = ["Pick a or b.", "Choose a or b."]


def held_out_agent(first_validation: int) -> Any:
    """One LLM call per rollout; train rewards at random (every group informative), held-out rollouts
    succeed in the first validation only: every later version has regressed."""
    validated = 0

    async def agent(task: dict, resources: Any) -> float:
        nonlocal validated
        llm = resources.llm
        async with AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0) as client:
            await client.chat.completions.create(
                model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=2
            )
        if not task.get("held_out"):
            return random.random()
        validated += 1
        return 1.0 if validated <= first_validation else 0.0

    return agent


@pytest.mark.slow
async def test_a_held_out_fall_rolls_latest_back_and_training_resumes_from_the_best(tmp_path: Path) -> None:
    model = build_tiny_model(
        tmp_path / "model", seed=0, tokenizer_kind="word", extra_text=PROMPTS, hidden_size=32, num_heads=2
    )
    store = SqlStore(tmp_path / "store.db")
    train = [Task(task_id=f"t{i}", input={"prompt": p}) for i, p in enumerate(PROMPTS)]
    held_out = [Task(task_id=f"v{i}", input={"prompt": p, "held_out": True}) for i, p in enumerate(PROMPTS)]
    out = io.StringIO()
    async with local_stack(store, model, model_name="toy") as urls:
        root = await store.add_resource_version(
            "llm", LLM(endpoints=[urls.model_v1], model="toy", checkpoint=str(model))
        )
        agent = held_out_agent(first_validation=len(held_out))
        runner = Runner(store, agent, workers=4, proxy_url=urls.proxy, show_progress=False)
        runner_task = asyncio.create_task(runner.run())
        config = LightningRLConfig(
            steps=2,
            tasks_per_step=2,
            rollouts_per_task=2,
            val_every=1,
            output_dir=tmp_path / "run",
            show_progress=False,
            rollback_on_regression=0.2,
        )
        rl = LightningRL(store, train, held_out, config, console=Console(file=out, width=300))
        metrics = await rl.run()
        runner.stop()
        await asyncio.wait_for(runner_task, timeout=60)

    step0, step1, step2 = metrics.rows
    assert step0["val/success"] == 1.0 and "rollback/to_version" not in step0
    versions = {v.version_id: v for v in await store.list_resource_versions("llm")}
    assert len(versions) == 3  # the base and one candidate per step
    for row in (step1, step2):
        assert row["val/success"] == 0.0
        assert row["rollback/to_version"] == root.version_id
        assert row["rollback/from_version"] == row["update/version_id"]
        assert "fell more than 0.2 below 1.00 after step 0" in row["rollback/reason"]
    # Step 2 trained from the best version, not from step 1's regressed one.
    assert versions[step1["update/version_id"]].parent_id == root.version_id
    assert versions[step2["update/version_id"]].parent_id == root.version_id
    assert (await store.get_latest_version("llm")).version_id == root.version_id
    assert rl.served_version_id == root.version_id
    moves = [m for m in await store.query_pointer_history("llm", "latest") if "fell" in m.reason]
    assert [(m.previous_version_id, m.version_id, m.actor) for m in moves] == [
        (step1["update/version_id"], root.version_id, rl.name),
        (step2["update/version_id"], root.version_id, rl.name),
    ]
    # The trainer holds the best version's weights again, ready for the next step.
    base = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).state_dict()
    held = rl.trainer.full_state()
    assert held.keys() <= base.keys() and all(torch.equal(held[k], base[k].float()) for k in held)
    assert out.getvalue().count(f"rolled back to {root.version_id}") == 2
    await store.close()
