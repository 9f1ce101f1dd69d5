"""Check results: each of the seven gate checks is pass, fail or unavailable, with a reason."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class CheckName(StrEnum):
    """The seven checks, in the order the gate reports them."""

    PINNED = "pinned_identity"
    COVERAGE = "span_coverage"
    RETRY_DEBT = "retry_debt"
    HOLDOUT = "holdout_gain"
    PROTECTED = "protected_cases"
    CANARY = "canary"
    ROLLBACK = "rollback_and_approval"


class CheckStatus(StrEnum):
    """Missing evidence is `unavailable`, never `pass`."""

    PASS = "pass"
    FAIL = "fail"
    UNAVAILABLE = "unavailable"


class CheckResult(BaseModel):
    """One check's outcome, its reason, and the numbers behind it."""

    model_config = ConfigDict(frozen=True)

    name: CheckName
    status: CheckStatus
    reason: str
    evidence: dict[str, Any] = Field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == CheckStatus.PASS
