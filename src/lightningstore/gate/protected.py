"""Protected cases: tasks a release must never get worse at."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ProtectedCase(BaseModel):
    """A task (by the `task_id` in rollout metadata) whose reward must not drop below the parent's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    resource_name: str = Field(min_length=1, max_length=200)
    case_id: str = Field(min_length=1, max_length=200)
    task_id: str = Field(min_length=1, max_length=200)
    input: Any = None
    min_reward: float | None = None
    """Optional floor: below it the case fails even if the parent was as bad."""
    note: str = ""
