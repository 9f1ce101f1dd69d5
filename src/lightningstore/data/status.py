"""Status enums and the one table of legal transitions (docs/architecture.md, "State machines")."""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from lightningstore.errors import IllegalTransitionError


class RolloutStatus(StrEnum):
    QUEUING = "queuing"
    PREPARING = "preparing"
    RUNNING = "running"
    REQUEUING = "requeuing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return not ROLLOUT_TRANSITIONS[self]


class AttemptStatus(StrEnum):
    PREPARING = "preparing"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMEOUT = "timeout"
    UNRESPONSIVE = "unresponsive"

    @property
    def terminal(self) -> bool:
        return not ATTEMPT_TRANSITIONS[self]

    @property
    def is_failure(self) -> bool:
        return self in FAILURE_KINDS


class RolloutMode(StrEnum):
    TRAIN = "train"
    VAL = "val"
    TEST = "test"


class WorkerStatus(StrEnum):
    IDLE = "idle"
    BUSY = "busy"
    OFFLINE = "offline"


TERMINAL_ROLLOUT = frozenset({RolloutStatus.SUCCEEDED, RolloutStatus.FAILED, RolloutStatus.CANCELLED})
# unresponsive is not terminal: a late span revives it (docs/architecture.md).
TERMINAL_ATTEMPT = frozenset({AttemptStatus.SUCCEEDED, AttemptStatus.FAILED, AttemptStatus.TIMEOUT})
FAILURE_KINDS = frozenset({AttemptStatus.FAILED, AttemptStatus.TIMEOUT, AttemptStatus.UNRESPONSIVE})

S = TypeVar("S", RolloutStatus, AttemptStatus)

ROLLOUT_TRANSITIONS: dict[RolloutStatus, frozenset[RolloutStatus]] = {
    RolloutStatus.QUEUING: frozenset({RolloutStatus.PREPARING, RolloutStatus.CANCELLED}),
    RolloutStatus.PREPARING: frozenset(
        {
            RolloutStatus.RUNNING,
            RolloutStatus.REQUEUING,
            RolloutStatus.SUCCEEDED,
            RolloutStatus.FAILED,
            RolloutStatus.CANCELLED,
        }
    ),
    RolloutStatus.RUNNING: frozenset(
        {RolloutStatus.REQUEUING, RolloutStatus.SUCCEEDED, RolloutStatus.FAILED, RolloutStatus.CANCELLED}
    ),
    RolloutStatus.REQUEUING: frozenset(
        {RolloutStatus.PREPARING, RolloutStatus.FAILED, RolloutStatus.CANCELLED}
    ),
    RolloutStatus.SUCCEEDED: frozenset(),
    RolloutStatus.FAILED: frozenset(),
    RolloutStatus.CANCELLED: frozenset(),
}

ATTEMPT_TRANSITIONS: dict[AttemptStatus, frozenset[AttemptStatus]] = {
    AttemptStatus.PREPARING: frozenset(
        {
            AttemptStatus.RUNNING,
            AttemptStatus.SUCCEEDED,
            AttemptStatus.FAILED,
            AttemptStatus.TIMEOUT,
            AttemptStatus.UNRESPONSIVE,
        }
    ),
    AttemptStatus.RUNNING: frozenset(
        {AttemptStatus.SUCCEEDED, AttemptStatus.FAILED, AttemptStatus.TIMEOUT, AttemptStatus.UNRESPONSIVE}
    ),
    AttemptStatus.UNRESPONSIVE: frozenset(
        {AttemptStatus.RUNNING, AttemptStatus.SUCCEEDED, AttemptStatus.FAILED, AttemptStatus.TIMEOUT}
    ),
    AttemptStatus.SUCCEEDED: frozenset(),
    AttemptStatus.FAILED: frozenset(),
    AttemptStatus.TIMEOUT: frozenset(),
}


def _check(kind: str, ident: str, legal: frozenset[S], current: S, new: S) -> None:
    """Raise IllegalTransitionError unless `current` -> `new` is in `legal` (same state is a no-op)."""
    if current != new and new not in legal:
        raise IllegalTransitionError(kind, ident, current.value, new.value)


def check_rollout_transition(rollout_id: str, current: RolloutStatus, new: RolloutStatus) -> None:
    """Raise IllegalTransitionError unless rollout `current` -> `new` is legal (same state is a no-op)."""
    _check("rollout", rollout_id, ROLLOUT_TRANSITIONS[current], current, new)


def check_attempt_transition(attempt_id: str, current: AttemptStatus, new: AttemptStatus) -> None:
    """Raise IllegalTransitionError unless attempt `current` -> `new` is legal (same state is a no-op)."""
    _check("attempt", attempt_id, ATTEMPT_TRANSITIONS[current], current, new)
