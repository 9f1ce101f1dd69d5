"""The "a or b" toy task of the RL-loop tests: prompts, tasks, the one-call agent, its format-only warm
model, that model published as the `llm` resource, and its success before training."""

from __future__ import annotations

from pathlib import Path

from openai import AsyncOpenAI

from algorithm import Evaluate, Task
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.demos.warmup import WarmupConfig, supervised_warmup
from lightningstore import LLM, LightningStore, ResourceVersion

PROMPTS = ["Pick a or b.", "Choose a or b.", "Say a or b."]


async def pick_b_agent(task: dict, resources) -> float:
    """The toy agent: one call; the reward is 1 when the model says b."""
    llm = resources.llm
    async with AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0) as client:
        reply = await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=3
        )
    return 1.0 if (reply.choices[0].message.content or "").strip() == "b" else 0.0


def warm_ab_model(root: Path) -> Path:
    """A tiny model that answers a or b at random (the warm-up teaches the format, not the choice)."""
    base = build_tiny_model(
        root / "base", seed=0, tokenizer_kind="word", extra_text=PROMPTS, hidden_size=32, num_heads=2
    )
    demos = [([{"role": "user", "content": p}], c) for p in PROMPTS for c in ("a", "b") for _ in range(8)]
    warm, _ = supervised_warmup(
        base, demos, root / "warm", WarmupConfig(steps=100, batch_size=16, lr=1e-2), show_progress=False
    )
    return warm


def toy_tasks() -> list[Task]:
    """One task per prompt."""
    return [Task(task_id=f"t{i}", input={"prompt": p}) for i, p in enumerate(PROMPTS)]


async def publish_warm(store: LightningStore, endpoint: str, warm_model: Path) -> ResourceVersion:
    """The warm model as the `llm` resource served at `endpoint`, sampled at temperature 1 in every mode."""
    return await store.add_resource_version(
        "llm",
        LLM(
            endpoints=[endpoint],
            model="toy",
            checkpoint=str(warm_model),
            sampling={"temperature": 1.0},
            sampling_by_mode={"val": {"temperature": 1.0}},
        ),
    )


async def success_of(store: LightningStore, tasks: list[Task], version: ResourceVersion) -> float:
    """Success rate of `version` over 16 rollouts per task (group prefix `b/`)."""
    bound = await store.add_resource_set({"llm": version.version_id})
    return (
        await Evaluate(store, tasks, resources_id=bound.resources_id, n=16, group_prefix="b/").run()
    ).success_rate
