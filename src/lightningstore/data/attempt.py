"""Attempt: one execution of a rollout."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from lightningstore.data.rollout import Rollout
from lightningstore.data.status import AttemptStatus


class Attempt(BaseModel):
    attempt_id: str
    rollout_id: str
    sequence_id: int
    """1 for the first attempt of a rollout, 2 for its first retry, ..."""
    status: AttemptStatus
    worker_id: str | None = None
    start_time: float
    end_time: float | None = None
    last_heartbeat_time: float | None = None
    failure_reason: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class AttemptedRollout(BaseModel):
    """A claimed rollout together with the attempt the claim opened."""

    rollout: Rollout
    attempt: Attempt

    @property
    def rollout_id(self) -> str:
        return self.rollout.rollout_id

    @property
    def attempt_id(self) -> str:
        return self.attempt.attempt_id
