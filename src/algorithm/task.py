"""Task: one input an algorithm runs its agent on, with a stable id (GRPO groups by it)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Task(BaseModel):
    task_id: str = Field(min_length=1)
    input: Any
    tags: dict[str, str] = Field(default_factory=dict)
    """Labels for per-slice metrics (e.g. {"op": "plus"})."""
