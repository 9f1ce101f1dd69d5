"""An agent for the fault tests (importable by name from runner processes): slow enough that a kill
lands mid-rollout, and retrying its model call as a production agent does."""

from __future__ import annotations

import asyncio

from openai import AsyncOpenAI

from lightningrl import rollout


@rollout
async def patient_agent(task: dict, resources) -> float:
    """Wait a little, then one model call retried (about 40 s of backoff) through a restarting gateway
    or model server; the reward grows with the reply's length (so sibling rollouts differ)."""
    await asyncio.sleep(0.5)
    llm = resources.llm
    async with AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=8) as client:
        reply = await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=4
        )
    return min(1.0, len(reply.choices[0].message.content or "") / 20)
