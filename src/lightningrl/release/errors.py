"""GateRefusal: the gate said no, and why."""

from __future__ import annotations

from lightningstore import ConflictError


class GateRefusal(ConflictError):
    """A release action refused by the gate (verdict HOLD, unresolvable parent, wrong routing)."""
