"""Evidence the gate records: canary runs, rollback drills and approvals, each bound to its basis."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from lightningstore.gate.policy import CanaryLimits
from lightningstore.gate.verdict import Basis


class EvidenceKind(StrEnum):
    CANARY = "canary"
    ROLLBACK = "rollback"
    APPROVAL = "approval"


class OutcomeSource(StrEnum):
    """Who established an outcome. Only a deterministic check of the destination verifies it."""

    VERIFIER = "verifier"
    JUDGE = "judge"
    HUMAN = "human"


class CanaryOutcome(BaseModel):
    """What the verifier found at one canary task's destination."""

    task_id: str
    rollout_id: str | None = None
    verified: bool
    reason: str
    source: OutcomeSource = OutcomeSource.VERIFIER
    """A judge's or a person's finding is kept and shown as such, never counted as verified."""
    uncertainty: float | None = Field(default=None, ge=0, le=1)
    """For judge or human evidence: how unsure the finding is (0 sure, 1 a guess)."""
    harmful: list[str] = Field(default_factory=list)
    """Effects the verifier recorded as harmful (an extra row, a deleted file, ...)."""


class CanaryRun(BaseModel):
    """A bounded run of a candidate on canary tasks, with one outcome per planned task."""

    kind: Literal["canary"] = "canary"
    receipt_id: str
    version_id: str
    limits: CanaryLimits
    planned: list[str]
    """Task ids the run had to cover; any without a verified outcome fails the check."""
    outcomes: list[CanaryOutcome]
    stopped_by: str | None = None
    """The limit that cut the run short, if any."""
    tool_calls: int = 0
    cost: float = 0.0
    seconds: float = 0.0
    task_digest: str
    evaluator: str | None = None
    environment: dict[str, str | None] = Field(default_factory=dict)
    """The deployment environment the run acted through (basis parts: tool contract, permissions,
    destination, model server); a later change of any makes the run stale."""


class RollbackDrill(BaseModel):
    """Proof that the parent resolves and that routing reaches it."""

    kind: Literal["rollback"] = "rollback"
    receipt_id: str
    parent_version_id: str | None
    resolved: bool
    reason: str
    routed_version_id: str | None = None
    """The version the proxy resolved for a probe rollout (must equal the parent)."""
    moved_pointer: bool = False
    """True for a real rollback (`approved` moved back), False for a drill."""
    parent: str | None = None
    """The basis `parent` part when the drill ran."""


class Approval(BaseModel):
    """An authorized actor's approval of a receipt on a given basis."""

    kind: Literal["approval"] = "approval"
    receipt_id: str
    actor: str = Field(min_length=1, max_length=200)
    """Who approves; over HTTP a named token's own name (another is 403), and only the recorded
    identity (`EvidenceRecord.recorded_by`) counts for a plan's canary approvers."""
    note: str = ""
    basis: Basis
    report_id: str | None = None


Evidence = Annotated[CanaryRun | RollbackDrill | Approval, Field(discriminator="kind")]


class EvidenceRecord(BaseModel):
    """A stored piece of evidence with who recorded it (the role comes from the credentials)."""

    evidence_id: str
    kind: EvidenceKind
    receipt_id: str
    body: Evidence
    recorded_by: str
    create_time: float
