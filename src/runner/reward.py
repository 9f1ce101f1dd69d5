"""emit_reward: a Reward row plus a reward span in the current attempt; and rewards from a return value."""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lightningstore.semconv import (
    REWARD_NAME,
    REWARD_SPAN_NAME,
    REWARD_STEP,
    REWARD_TARGET_SPAN,
    REWARD_VALUE,
)
from runner.tracing.context import AttemptContext, require_attempt

if TYPE_CHECKING:
    from lightningstore import RewardIn

PRIMARY_REWARD = "reward"


def emit_reward(
    value: float,
    name: str = PRIMARY_REWARD,
    step: int | None = None,
    span_id: str | None = None,
    primary: bool | None = None,
    *,
    context: AttemptContext | None = None,
) -> RewardIn:
    """Record a named reward of the current rollout (optionally judging one step or span); returns the row.

    `primary` defaults to `name == "reward"`. `context` names the attempt explicitly (default: the
    current one). The row is written with the attempt's next flush.
    """
    if context is None:
        context = require_attempt("emit_reward")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"reward {name!r} must be a finite number, got {value!r}")
    from lightningstore.data.reward import RewardIn  # here: the agent's import of emit_reward stays light

    reward = RewardIn(
        rollout_id=context.rollout_id,
        attempt_id=context.attempt_id,
        name=name,
        value=float(value),
        step=step,
        span_id=span_id,
        primary=(name == PRIMARY_REWARD) if primary is None else primary,
        reward_id=f"rw-{uuid.uuid4().hex}",
    )
    attributes: dict[str, Any] = {REWARD_NAME: name, REWARD_VALUE: float(value)}
    if step is not None:
        attributes[REWARD_STEP] = step
    if span_id is not None:
        attributes[REWARD_TARGET_SPAN] = span_id
    with context.tracer.start_as_current_span(REWARD_SPAN_NAME, attributes=attributes):
        pass
    context.attempt_tracer.add_reward(reward)
    return reward


def rewards_from_result(result: Any) -> list[tuple[str, float, bool]]:
    """(name, value, primary) for an agent's return value: None, a number, or a dict of named numbers."""
    if result is None:
        return []
    if isinstance(result, int | float) and not isinstance(result, bool):
        return [(PRIMARY_REWARD, float(result), True)]
    if isinstance(result, Mapping):
        if not result:
            return []
        names = [str(k) for k in result]
        primary = PRIMARY_REWARD if PRIMARY_REWARD in names else names[0]
        out: list[tuple[str, float, bool]] = []
        for key, value in result.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"reward {key!r} returned by the agent must be a number, got {value!r}")
            out.append((str(key), float(value), str(key) == primary))
        return out
    raise TypeError(
        f"an agent must return None, a number or a dict of named numbers, got {type(result).__name__}: "
        f"{result!r:.200}"
    )
