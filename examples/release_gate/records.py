"""Real rollouts, attempts, spans and rewards written through the store API: the evidence the checks read."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from lightningstore import AttemptStatus, LightningStore, RewardIn, Rollout, RolloutConfig, SpanIn
from lightningstore.semconv import GEN_AI_INPUT_TOKENS, GEN_AI_OPERATION, GEN_AI_OUTPUT_TOKENS

FULL = ("agent", "llm", "reward")
SPAN_NAMES = {
    "agent": "lightningrl.rollout",
    "llm": "chat",
    "reward": "lightningrl.reward",
    "tool": "tool.write",
}


def spans_for(rollout_id: str, attempt_id: str, kinds: Sequence[str]) -> list[SpanIn]:
    trace_id = uuid.uuid4().hex
    out = []
    for i, kind in enumerate(kinds):
        attributes: dict[str, Any] = {}
        if kind == "llm":
            attributes = {GEN_AI_OPERATION: "chat", GEN_AI_INPUT_TOKENS: 10, GEN_AI_OUTPUT_TOKENS: 5}
        out.append(
            SpanIn(
                rollout_id=rollout_id,
                attempt_id=attempt_id,
                trace_id=trace_id,
                span_id=f"{i:016x}",
                name=SPAN_NAMES[kind],
                attributes=attributes,
            )
        )
    return out


async def record_rollout(
    store: LightningStore,
    *,
    mode: str,
    resources_id: str,
    task_id: str,
    reward: float | None,
    kinds: Sequence[str] = FULL,
    failures: Sequence[str] = (),
    retry_kind: str | None = None,
) -> Rollout:
    """One finished rollout: `failures` failed attempts (each retried), then a succeeded one with spans of
    `kinds` and the primary reward."""
    config = RolloutConfig(
        max_attempts=len(failures) + 1,
        retry_on=[AttemptStatus.TIMEOUT, AttemptStatus.UNRESPONSIVE, AttemptStatus.FAILED],
    )
    rollout = await store.enqueue_rollout(
        {"task_id": task_id},
        mode=mode,
        resources_id=resources_id,
        config=config,
        metadata={"task_id": task_id},
    )
    rid = rollout.rollout_id
    for status in failures:
        claim = await store.start_attempt(rid)
        await store.update_attempt(
            rid, claim.attempt_id, status=status, failure_reason=f"{status}: worker lost"
        )
    claim = await store.start_attempt(rid)
    if retry_kind is not None:
        await store.update_attempt(rid, claim.attempt_id, metadata={"retry_kind": retry_kind})
    await store.add_many_spans(spans_for(rid, claim.attempt_id, kinds))
    if reward is not None:
        await store.add_reward(RewardIn(rollout_id=rid, attempt_id=claim.attempt_id, value=reward))
    await store.update_attempt(rid, claim.attempt_id, status="succeeded")
    stored = await store.get_rollout_by_id(rid)
    assert stored is not None
    return stored
