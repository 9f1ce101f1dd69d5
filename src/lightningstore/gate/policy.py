"""GatePolicy: the thresholds and limits a resource's releases are judged by (not the learner's to set)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_SPAN_COVERAGE = ("agent", "llm", "reward")


class CanaryLimits(BaseModel):
    """Bounds of one canary or rollback run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tasks: int = Field(default=20, ge=1, le=10_000)
    max_seconds: float = Field(default=300.0, gt=0)
    max_tool_calls: int = Field(default=200, ge=0)
    max_cost: float = Field(default=1.0, ge=0)
    """In the policy's cost unit, from LLM token usage times `cost_per_1k_tokens`."""
    cost_per_1k_tokens: float = Field(default=0.0, ge=0)


class StopThresholds(BaseModel):
    """When the training loop pauses (see lightningrl.release.stop)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_span_coverage: float = Field(default=0.95, ge=0, le=1)
    """Fraction of recent finished train rollouts that must have their declared span kinds."""
    window: int = Field(default=200, ge=1)
    """How many of the most recent finished train rollouts the coverage and retry checks look at."""


class DeploymentEnvironment(BaseModel):
    """What the agent acts through in production; a change makes the evidence that relied on it stale."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_contract: dict[str, Any] = Field(default_factory=dict)
    """The tools the agent may call and their contracts (name -> schema or version)."""
    permissions: list[str] = Field(default_factory=list)
    """What the agent's credentials allow (scopes, roles)."""
    destination: str | None = None
    """Where its effects land (a database, a bucket, an API)."""
    model_server: str | None = None
    """What serves the model (engine, version, hardware, endpoints)."""


class GatePolicy(BaseModel):
    """Release policy of one resource."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    resource_name: str = Field(min_length=1, max_length=200)
    evaluator: str | None = None
    """The registered evaluator receipts of this resource pin by default."""
    retry_budget: int = Field(default=0, ge=0)
    """Unexpected retries a release may carry. Zero unless the policy says otherwise before training:
    a receipt pins the budget of the policy in force when it is filed."""
    span_coverage: list[str] = Field(default_factory=lambda: list(DEFAULT_SPAN_COVERAGE))
    min_holdout_gain: float = 0.0
    """The candidate's mean holdout reward must exceed its parent's by more than this."""
    min_holdout_tasks: int = Field(default=1, ge=1)
    expected_retry_markers: list[str] = Field(default_factory=lambda: ["resample"])
    """A retry is expected (not debt) when its attempt's metadata `retry_kind` or the previous
    attempt's failure reason contains one of these."""
    canary: CanaryLimits = Field(default_factory=CanaryLimits)
    stop: StopThresholds = Field(default_factory=StopThresholds)
    environment: DeploymentEnvironment = Field(default_factory=DeploymentEnvironment)
    canary_approvers: list[str] = Field(default_factory=list)
    """Actors whose approval counts for a canary (copied into each training plan; empty: any approver)."""
    default_approvers: list[str] = Field(default_factory=list)
    """Actors who may make a candidate the default (copied into each training plan; empty: any approver)."""
    require_plan: bool = False
    """Hold receipts whose candidate names no training plan filed before training."""
