"""The gate's verdict over the seven checks, and the basis a report was computed on."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from lightningstore.gate.check import CheckName, CheckResult, CheckStatus


class Verdict(StrEnum):
    PROMOTE = "PROMOTE TO BOUNDED CANARY"
    HOLD = "HOLD"


class Basis(BaseModel):
    """What a check depended on; a later change of any part makes the checks using it stale."""

    model_config = ConfigDict(frozen=True)

    evaluator: str | None
    """`name@version` of the evaluator registered now (None: none registered)."""
    parent: str | None
    """The candidate's parent and the `approved` version production runs, `parent|approved`."""
    train: str
    holdout: str
    protected: str
    canary: str | None = None
    tool_contract: str | None = None
    permissions: str | None = None
    destination: str | None = None
    model_server: str | None = None
    """Digests of the policy's deployment environment, part by part (None: not declared)."""
    retry_policy: str | None = None
    """Digest of the retry budget and the markers of expected retries."""


ENVIRONMENT_PARTS = ("tool_contract", "permissions", "destination", "model_server")


# Which parts of the basis each check reads (docs/architecture.md, "The release gate": evaluator, parent, task distribution).
DEPENDS_ON: dict[CheckName, tuple[str, ...]] = {
    CheckName.PINNED: ("evaluator", "parent", "train", "holdout"),
    CheckName.COVERAGE: ("train", "holdout"),
    CheckName.RETRY_DEBT: ("train", "holdout", "retry_policy"),
    CheckName.HOLDOUT: ("evaluator", "parent", "holdout"),
    CheckName.PROTECTED: ("evaluator", "parent", "protected"),
    # A canary observed the agent acting through these tools, credentials, destination and server.
    CheckName.CANARY: ("evaluator", "canary", *ENVIRONMENT_PARTS),
    CheckName.ROLLBACK: ("parent", "model_server"),
}


def relied_on(check: CheckName, basis: Basis) -> dict[str, str | None]:
    """The basis parts a check's result rests on, with their values (kept with the result)."""
    return {part: getattr(basis, part) for part in DEPENDS_ON[check]}


def stale_parts(check: CheckName, then: Basis, now: Basis) -> list[str]:
    """The basis parts `check` depends on that changed between `then` and `now`."""
    return [part for part in DEPENDS_ON[check] if getattr(then, part) != getattr(now, part)]


def verdict_of(checks: list[CheckResult]) -> Verdict:
    """PROMOTE only when all seven checks are present and pass."""
    seen = {c.name for c in checks if c.status == CheckStatus.PASS}
    return Verdict.PROMOTE if seen == set(CheckName) else Verdict.HOLD


class GateReport(BaseModel):
    """The seven checks of one receipt, the verdict, and the basis they were computed on."""

    report_id: str
    receipt_id: str
    candidate_version_id: str
    checks: list[CheckResult]
    verdict: Verdict
    basis: Basis
    recorded_by: str = "unknown"
    create_time: float = 0.0
    notes: list[str] = Field(default_factory=list)

    @property
    def failing(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed]

    def check(self, name: CheckName) -> CheckResult:
        return next(c for c in self.checks if c.name == name)
