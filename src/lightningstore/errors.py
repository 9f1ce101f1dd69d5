"""Typed store errors; each maps to one HTTP status and names what is wrong."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


class StoreError(Exception):
    """Base of every error the store raises on purpose."""

    http_status = 500
    code = "store_error"


class InvalidInputError(StoreError, ValueError):
    """A payload or argument is invalid; `field` names it."""

    http_status = 422
    code = "invalid_input"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


class NotFoundError(StoreError, LookupError):
    """An id names nothing stored."""

    http_status = 404
    code = "not_found"

    def __init__(self, kind: str, ident: str) -> None:
        super().__init__(f"{kind} {ident!r} not found")
        self.kind = kind
        self.ident = ident


def found(value: T | None, kind: str, ident: str) -> T:
    """`value`, or NotFoundError naming `kind` and `ident` when a lookup gave None."""
    if value is None:
        raise NotFoundError(kind, ident)
    return value


class ConflictError(StoreError):
    """The request contradicts what is stored (e.g. an id reused with other content)."""

    http_status = 409
    code = "conflict"


class IllegalTransitionError(ConflictError):
    """A status change that the state machine forbids."""

    code = "illegal_transition"

    def __init__(self, kind: str, ident: str, current: str, new: str) -> None:
        super().__init__(f"{kind} {ident!r}: illegal transition {current} -> {new}")
        self.kind = kind
        self.ident = ident
        self.current = current
        self.new = new


class PermissionDeniedError(StoreError):
    """The caller's credentials do not allow this operation."""

    http_status = 403
    code = "forbidden"


class QuotaExceededError(StoreError):
    """An agent key's attempt wrote more than its quota allows (spans, bytes or requests): nothing of the
    request is stored, and asking again will not help (unlike a rate limit's 429)."""

    http_status = 429
    code = "quota_exceeded"

    def __init__(self, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind


ERRORS_BY_CODE: dict[str, type[StoreError]] = {
    cls.code: cls
    for cls in (
        StoreError,
        InvalidInputError,
        NotFoundError,
        ConflictError,
        IllegalTransitionError,
        PermissionDeniedError,
        QuotaExceededError,
    )
}
