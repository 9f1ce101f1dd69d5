"""Store statistics."""

from __future__ import annotations

from pydantic import BaseModel, Field


class StoreStatistics(BaseModel):
    rollouts_by_status: dict[str, int] = Field(default_factory=dict)
    attempts_by_status: dict[str, int] = Field(default_factory=dict)
    total_rollouts: int = 0
    total_attempts: int = 0
    total_spans: int = 0
    total_rewards: int = 0
    total_workers: int = 0
    total_resource_versions: int = 0
