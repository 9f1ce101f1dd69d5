"""Worker: a runner process that claims rollouts."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from lightningstore.data.status import WorkerStatus


class Worker(BaseModel):
    worker_id: str
    status: WorkerStatus = WorkerStatus.IDLE
    last_heartbeat_time: float | None = None
    current_rollout_id: str | None = None
    current_attempt_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
