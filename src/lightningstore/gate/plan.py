"""The training plan: the part of an update receipt frozen BEFORE training starts.

`LightningRL` (and so `fit`) files it when a run starts: the version training starts from, the data it
will train and be held out on, the evaluator, the algorithm config, the code revision, the scope, the
retry budget and span coverage in force, and which actors may approve the canary and set the default.
Content-addressed like a receipt, so it cannot be edited; every candidate of the run names it
(`plan_id` in its metadata) and its receipt copies it unchanged, appending only what training produced.
"""

from __future__ import annotations

from pydantic import Field

from lightningstore.gate.receipt import DataSnapshot, Filed, PlannedSetup

PLAN_FIELDS = tuple(PlannedSetup.model_fields)
"""The fields a receipt carries from its plan; a receipt whose value differs rewrote the plan."""


class PlanBody(PlannedSetup):
    """Everything fixed before training; its digest is the plan id."""

    resource_name: str = Field(min_length=1, max_length=200)
    parent_version_id: str = Field(min_length=1, max_length=64)
    """The version training starts from (every candidate of the run descends from it)."""
    train: DataSnapshot
    """The train tasks (or, for continuous learning, the rule that selects its traffic)."""
    holdout: DataSnapshot
    canary_approvers: list[str] = Field(default_factory=list)
    """Actors whose approval counts for the canary (empty: any authorised approver)."""
    default_approvers: list[str] = Field(default_factory=list)
    """Actors who may make a candidate the default (`approved`; empty: any authorised approver)."""


class TrainingPlan(PlanBody, Filed):
    """A stored plan: `plan_id` is the digest of its body."""

    body_type = PlanBody
    id_field = "plan_id"
    id_prefix = "plan"
    plan_id: str
