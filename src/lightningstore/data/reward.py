"""Reward: a named numeric judgment of a rollout, optionally of one step (span) of it."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, field_validator


class RewardIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rollout_id: str = Field(min_length=1)
    attempt_id: str | None = None
    name: str = Field(default="reward", min_length=1, max_length=200)
    value: StrictFloat
    """A finite number; an int becomes a float, a bool or a numeric string is refused (JSON `true` is no score)."""
    span_id: str | None = Field(default=None, max_length=64)
    """The span (usually an LLM call) this reward judges; None judges the whole episode."""
    step: int | None = Field(default=None, ge=0)
    """Alternatively, the 0-based index of the LLM call it judges."""
    primary: bool = True
    reward_id: str | None = Field(default=None, min_length=1, max_length=200)
    """Caller-supplied id makes the write idempotent."""

    @property
    def judges_episode(self) -> bool:
        """True when the reward judges the whole rollout (no `span_id`, no `step`)."""
        return self.span_id is None and self.step is None

    @field_validator("value")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError(f"reward value must be finite, got {value!r}")
        return value


class Reward(RewardIn):
    model_config = ConfigDict(extra="ignore")

    reward_id: str
    create_time: float
