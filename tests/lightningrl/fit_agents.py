"""Agents for the fit tests (importable by name from runner processes), and their subprocess environment."""

from __future__ import annotations

import hashlib
import os
import sys

from openai import AsyncOpenAI

from lightningrl import rollout

PROMPTS = ["Pick a or b.", "Choose a or b.", "Say a or b."]


@rollout
async def reply_length_agent(task: dict, resources) -> float:
    """One model call; the reward grows with the reply's length (so sibling rollouts differ)."""
    llm = resources.llm
    async with AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0) as client:
        reply = await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=4
        )
    return min(1.0, len(reply.choices[0].message.content or "") / 20)


@rollout
async def fruit_agent(task: dict, resources) -> float:
    """One model call to a real chat model; the reward grows with the reply's length (siblings differ).

    Twelve tokens are at most ~80 characters, so the reward never saturates: a group whose four
    replies all scored 1.0 has no advantage and its update is skipped (seen on a fresh clone)."""
    llm = resources.llm
    async with AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0) as client:
        reply = await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=12
        )
    return min(1.0, len(reply.choices[0].message.content or "") / 200)


@rollout
async def scripted_agent(task: dict, resources) -> float:
    """One model call (so the rollout has its span), then the reward the row names: success that does
    not hang on a tiny model's sampled words, for checking the counting around it."""
    llm = resources.llm
    async with AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0) as client:
        await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=2
        )
    return float(task["reward"])


@rollout
async def key_blind_agent(task: dict, resources) -> float:
    """One model call through the gateway (raises when it fails), then 1.0 when nothing in this
    process's environment is the endpoint's API key (the row names the variable and the key's sha256)."""
    llm = resources.llm
    async with AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0) as client:
        await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=2
        )
    seen = {hashlib.sha256(v.encode()).hexdigest() for v in os.environ.values()}
    return float(task["key_env"] not in os.environ and task["key_sha256"] not in seen)


# An in-process trainer in this test process sets these; a child trainer must pick its own port.
_TORCH_DIST_VARS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")


def subprocess_env() -> dict[str, str]:
    """This process's environment and import path, without torch.distributed's rendezvous variables."""
    env = {k: v for k, v in os.environ.items() if k not in _TORCH_DIST_VARS}
    return {**env, "PYTHONPATH": os.pathsep.join(sys.path)}
