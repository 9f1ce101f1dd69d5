"""Agents the fault tests run in runner subprocesses (importable as `fault_agents:<name>`)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from runner import AgentResources, emit_reward, rollout, trace


@trace(name="before_hang")
def before_hang(task: str) -> str:
    return task


@rollout
async def first_attempt_hangs(task: str, resources: AgentResources) -> float:
    """The first attempt (no marker file yet) records a step and a reward, then hangs; later ones succeed."""
    marker = Path(os.environ["FAULT_MARKER"])
    if not marker.exists():
        marker.write_text(resources.attempt_id)
        before_hang(task)
        emit_reward(0.5, name="progress")
        await asyncio.sleep(120)
    return 1.0


@rollout
async def always_hangs(task: str, resources: AgentResources) -> float:
    before_hang(task)
    await asyncio.sleep(120)
    return 1.0
