"""Span and reward routes: idempotent writes (per attempt for agent keys) and ordered reads."""

from __future__ import annotations

from typing import Annotated

from fastapi import Body, Query, Request

from lightningstore.auth.agent_writes import refuse_training_attributes, require_live_attempt
from lightningstore.auth.tokens import Caller, Permission, Role
from lightningstore.data.reward import Reward, RewardIn
from lightningstore.data.span import Span, SpanIn
from lightningstore.http_api import MAX_INT, RewardsManyBody, SpansManyBody
from lightningstore.server.auth import context
from lightningstore.store import LightningStore

MAX_SPANS = 100_000
"""The most spans one POST /v1/spans takes."""


async def add_spans(request: Request, spans: list[SpanIn] = Body(max_length=MAX_SPANS)) -> list[Span]:
    """Store spans in one transaction, idempotent on (attempt_id, span_id); an agent key writes only its
    live attempt's, and none with the proxy's training attributes (403)."""
    store, caller = context(request)
    return await add_spans_as(store, caller, spans)


async def add_spans_as(store: LightningStore, caller: Caller, spans: list[SpanIn]) -> list[Span]:
    """POST /v1/spans once its body is read (shared with the server's fast path)."""
    for span in spans:
        caller.require_attempt(span.rollout_id, span.attempt_id)
    refuse_training_attributes(caller, spans)
    await require_live_attempt(store, caller)
    return await store.add_many_spans(spans)


async def add_reward(request: Request, reward: RewardIn) -> Reward:
    """Attach a named reward to a rollout; idempotent on `reward_id`; an agent key only while its attempt is live."""
    store, caller = context(request)
    if caller.role == Role.AGENT and reward.attempt_id is None:
        # An agent key speaks for one attempt: its rewards belong to that attempt.
        reward = reward.model_copy(update={"attempt_id": caller.attempt_id})
    caller.require_attempt(reward.rollout_id, reward.attempt_id)
    await require_live_attempt(store, caller)
    return await store.add_reward(reward)


async def query_spans(
    request: Request,
    rollout_id: str,
    attempt_id: str | None = None,
    name: str | None = None,
    after_sequence_id: Annotated[int | None, Query(ge=-MAX_INT, le=MAX_INT)] = None,
    limit: Annotated[int | None, Query(ge=0, le=MAX_INT)] = None,
) -> list[Span]:
    """Spans of a rollout in `sequence_id` order; `attempt_id=latest` for the latest attempt's."""
    store, caller = context(request)
    caller.require(Permission.READ)
    return await store.query_spans(
        rollout_id, attempt_id, name=name, after_sequence_id=after_sequence_id, limit=limit
    )


async def query_spans_as(store: LightningStore, caller: Caller, _: None, rollout_id: str) -> list[Span]:
    """GET /v1/rollouts/{rollout_id}/spans without a query string (shared with the server's fast path)."""
    caller.require(Permission.READ)
    return await store.query_spans(rollout_id)


async def query_rewards(request: Request, rollout_id: str, name: str | None = None) -> list[Reward]:
    """Rewards of a rollout in the order they were added."""
    store, caller = context(request)
    caller.require(Permission.READ)
    return await store.query_rewards(rollout_id, name=name)


async def query_spans_many(request: Request, body: SpansManyBody) -> dict[str, list[Span]]:
    """Spans of many rollouts in one read: rollout_id -> spans in `sequence_id` order (`[]` if none)."""
    store, caller = context(request)
    caller.require(Permission.READ)
    return await store.query_spans_many(body.rollout_ids, body.attempt, attributes=body.attributes)


async def query_rewards_many(request: Request, body: RewardsManyBody) -> dict[str, list[Reward]]:
    """Rewards of many rollouts in one read: rollout_id -> rewards in the order added (`[]` if none)."""
    store, caller = context(request)
    caller.require(Permission.READ)
    return await store.query_rewards_many(body.rollout_ids)
