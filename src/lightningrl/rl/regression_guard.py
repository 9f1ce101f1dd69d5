"""RegressionGuard: the best validated version so far, and when a validation fell too far below it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Validated:
    """One validation: the version's held-out success and the step it was measured after."""

    version_id: str
    success: float
    step: int


@dataclass
class RegressionGuard:
    """Watches held-out success (`LightningRLConfig.rollback_on_regression`): a validation more than
    `tolerance` below the best one so far names the best to go back to. Ties keep the newer version."""

    tolerance: float
    best: Validated | None = None

    def observe(self, validated: Validated) -> Validated | None:
        """The best validation to roll back to when `validated` fell more than `tolerance` below it;
        else None (and `validated` becomes the best when it is at least as good)."""
        best = self.best
        if best is not None and best.success - validated.success > self.tolerance:
            return best
        if best is None or validated.success >= best.success:
            self.best = validated
        return None
