"""A bounded Runner run: at most N tasks, a wall-clock limit, and tool-call and cost ceilings."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lightningrl.release.errors import GateRefusal
from lightningrl.release.selection import GATE_TAG
from lightningrl.release.spans import span_kind
from lightningrl.release.verifier import CanaryTask
from lightningstore import (
    LightningStore,
    Rollout,
    RolloutConfig,
    RolloutMode,
    RolloutRequest,
    RolloutStatus,
    spans_of_rollouts,
)
from lightningstore.gate import CanaryLimits
from lightningstore.semconv import GEN_AI_INPUT_TOKENS, GEN_AI_OUTPUT_TOKENS
from runner import LitAgent, Runner

POLL_SECONDS = 0.1
STOP_WAIT_SECONDS = 30.0


@dataclass
class BoundedRun:
    """The rollouts of a bounded run and what they consumed."""

    rollouts: dict[str, Rollout]
    """task id -> its rollout as it ended (or as it was left when the run stopped)."""
    stopped_by: str | None = None
    tool_calls: int = 0
    tokens: int = 0
    seconds: float = 0.0
    spans: dict[str, list[Any]] = field(default_factory=dict)

    def cost(self, limits: CanaryLimits) -> float:
        return self.tokens / 1000 * limits.cost_per_1k_tokens


async def _refuse_busy_queue(store: LightningStore) -> None:
    waiting = await store.query_rollouts(status=["queuing", "requeuing"], limit=1)
    if waiting:
        raise GateRefusal(
            f"the store has waiting rollouts (e.g. {waiting[0].rollout_id}); a bounded run's Runner would claim "
            "them too: run it when the queue is empty or on a separate store"
        )


async def bounded_run(
    store: LightningStore,
    agent: LitAgent | Callable[..., Any],
    tasks: Sequence[CanaryTask],
    limits: CanaryLimits,
    *,
    tag: str,
    resources_id: str | None,
    production: bool,
    workers: int = 2,
    proxy_url: str | None = None,
    agent_key_secret: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> BoundedRun:
    """Enqueue at most `limits.max_tasks` tasks (mode test, tagged `gate=tag`) and run them with a Runner
    until done or a limit is hit; unfinished rollouts are then cancelled."""
    await _refuse_busy_queue(store)
    planned = list(tasks)[: limits.max_tasks]
    config = RolloutConfig(timeout_seconds=limits.max_seconds, max_attempts=1)
    requests = [
        RolloutRequest(
            input=t.input,
            mode=RolloutMode.TEST,
            resources_id=resources_id,
            config=config,
            metadata={**(metadata or {}), GATE_TAG: tag, "task_id": t.task_id},
            group_id=f"gate-{tag}/{t.task_id}",
        )
        for t in planned
    ]
    enqueued = await store.enqueue_many_rollouts(requests)
    ids = {t.task_id: r.rollout_id for t, r in zip(planned, enqueued, strict=True)}
    runner = Runner(
        store,
        agent,
        workers=workers,
        proxy_url=proxy_url,
        agent_key_secret=agent_key_secret,
        production=production,
        show_progress=False,
    )
    result = BoundedRun(rollouts={})
    started = time.monotonic()
    work = asyncio.create_task(runner.run(max_rollouts=len(planned)))
    counted: set[str] = set()
    while not work.done():
        await asyncio.wait({work}, timeout=POLL_SECONDS)
        done = await store.wait_for_rollouts(list(ids.values()), timeout=0)
        fresh = [r.rollout_id for r in done if r.rollout_id not in counted]
        for rollout_id, spans in (await spans_of_rollouts(store, fresh, None)).items():
            counted.add(rollout_id)
            result.spans[rollout_id] = spans
            result.tool_calls += sum(1 for s in spans if span_kind(s) == "tool")
            result.tokens += sum(
                int(s.attributes.get(GEN_AI_INPUT_TOKENS, 0)) + int(s.attributes.get(GEN_AI_OUTPUT_TOKENS, 0))
                for s in spans
            )
        result.stopped_by = _limit_hit(result, limits, time.monotonic() - started)
        if result.stopped_by is not None and not work.done():
            runner.stop(force=True)
            break
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(work, timeout=STOP_WAIT_SECONDS)
    result.seconds = time.monotonic() - started
    ended = {r.rollout_id: r for r in await store.query_rollouts(rollout_ids=list(ids.values()))}
    for task_id, rollout_id in ids.items():
        rollout = ended.get(rollout_id)
        if rollout is not None and not rollout.status.terminal:
            with contextlib.suppress(Exception):
                rollout = await store.cancel_rollout(rollout_id)
        if rollout is not None:
            result.rollouts[task_id] = rollout
    return result


def _limit_hit(run: BoundedRun, limits: CanaryLimits, elapsed: float) -> str | None:
    if run.tool_calls > limits.max_tool_calls:
        return "tool_calls"
    if run.cost(limits) > limits.max_cost:
        return "cost"
    if elapsed > limits.max_seconds:
        return "time"
    return None


def succeeded(rollout: Rollout | None) -> bool:
    return rollout is not None and rollout.status == RolloutStatus.SUCCEEDED
