"""Agent Lightning v1.0's events endpoint: an agent posts its reward (or its own events) with its key.

`POST /api/rollouts/{rollout_id}/attempt/{attempt_id}/events` with `{"event_type": "reward", "data":
{"value": <float>}}` stores a primary `Reward` on that attempt, exactly as `POST /v1/rewards` would.
Agent Lightning v1.0 keeps any other event type as an opaque record; here it becomes a span named
`lightningrl.event` carrying the type and the data. `model_request` is refused: the proxy records
model calls, and one posted by an agent must never pass for one. An agent key posts only while its
attempt is live (403 once it has ended).
"""

from __future__ import annotations

import json
import math
import secrets
import time
from typing import Any

from fastapi import Request
from pydantic import BaseModel, Field

from lightningstore import semconv
from lightningstore.auth.agent_writes import require_live_attempt
from lightningstore.data.reward import RewardIn
from lightningstore.data.span import SpanIn
from lightningstore.errors import InvalidInputError
from lightningstore.server.auth import context


class EventIn(BaseModel):
    """An event as an Agent Lightning v1.0 agent posts it."""

    event_type: str = Field(min_length=1, max_length=200)
    data: dict[str, Any] = Field(default_factory=dict)


class Event(EventIn):
    """The stored event as Agent Lightning v1.0 answers it."""

    rollout_id: str
    attempt_id: str
    timestamp: float


def reward_value(data: dict[str, Any]) -> float:
    """The reward event's `data.value`: a finite number (a bool is not one)."""
    value = data.get("value")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError("data.value", f"a reward event needs a number, got {value!r:.80}")
    if not math.isfinite(value):
        raise InvalidInputError("data.value", f"reward value must be finite, got {value!r}")
    return float(value)


def event_span(event: EventIn, rollout_id: str, attempt_id: str, now: float) -> SpanIn:
    """A non-reward event as a span of its attempt."""
    return SpanIn(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        trace_id=secrets.token_hex(16),
        span_id=secrets.token_hex(8),
        name=semconv.EVENT_SPAN_NAME,
        start_time=now,
        end_time=now,
        attributes={
            semconv.ROLLOUT_ID: rollout_id,
            semconv.ATTEMPT_ID: attempt_id,
            semconv.EVENT_TYPE: event.event_type,
            semconv.EVENT_DATA: json.dumps(event.data, default=str, ensure_ascii=False),
        },
    )


async def post_event(request: Request, rollout_id: str, attempt_id: str, event: EventIn) -> Event:
    """Record one event of an attempt: a reward as a primary `Reward`, any other type as a span."""
    store, caller = context(request)
    caller.require_attempt(rollout_id, attempt_id)
    if event.event_type == semconv.AGL_MODEL_REQUEST_EVENT:
        raise InvalidInputError(
            "event_type",
            f"{event.event_type!r} is recorded by the model proxy and may not be posted; post "
            f"{semconv.AGL_REWARD_EVENT!r} (data.value: a number) or an event type of your own",
        )
    await require_live_attempt(store, caller)
    now = time.time()
    if event.event_type == semconv.AGL_REWARD_EVENT:
        value = reward_value(event.data)
        reward = await store.add_reward(RewardIn(rollout_id=rollout_id, attempt_id=attempt_id, value=value))
        now = reward.create_time
    else:
        await store.add_span(event_span(event, rollout_id, attempt_id, now))
    return Event(
        event_type=event.event_type,
        data=event.data,
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        timestamp=now,
    )
