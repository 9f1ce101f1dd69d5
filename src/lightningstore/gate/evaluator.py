"""Evaluator registry entries: which reward judges a resource, at which version."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from lightningstore.gate.receipt import EvaluatorRef


class Evaluator(BaseModel):
    """A registered evaluator version; the newest registration of a name is the current one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    version: str = Field(min_length=1, max_length=200)
    reward_name: str = Field(default="reward", min_length=1, max_length=200)
    description: str = ""

    def ref(self) -> EvaluatorRef:
        return EvaluatorRef(name=self.name, version=self.version, reward_name=self.reward_name)
