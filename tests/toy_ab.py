"""The "a or b" toy task of the RL-loop tests: prompts, the one-call agent and its format-only warm model."""

from __future__ import annotations

from pathlib import Path

from openai import AsyncOpenAI

from lightningrl.tinylm import build_tiny_model
from lightningrl.warmup import WarmupConfig, supervised_warmup

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
