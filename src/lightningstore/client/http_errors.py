"""The store's typed errors as they come back over HTTP, and how long a refusal asks to wait."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol

import orjson

from lightningstore.errors import (
    ERRORS_BY_CODE,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
    QuotaExceededError,
    StoreError,
)

# For answers without a known `code` (a proxy in between, an unknown route).
_STATUS_FALLBACK: dict[int, type[StoreError]] = {
    **dict.fromkeys((400, 413, 415, 422), InvalidInputError),
    **dict.fromkeys((401, 403), PermissionDeniedError),
    404: NotFoundError,
    409: ConflictError,
}
_ERROR_ATTRIBUTES = ("field", "kind", "ident", "current", "new")


class HttpAnswer(Protocol):
    """What these functions read of an answer: an httpx.Response or the StoreClient's WireResponse."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def content(self) -> bytes: ...


class StoreUnavailableError(StoreError):
    """The server could not be reached (or kept failing) within the retry budget."""

    http_status = 503
    code = "unavailable"


def retry_after(response: HttpAnswer) -> float:
    """The seconds a response's `Retry-After` header asks to wait; 0.0 when absent or not in seconds."""
    try:
        seconds = float(response.headers.get("retry-after", ""))
    except ValueError:
        return 0.0
    return seconds if math.isfinite(seconds) and seconds > 0 else 0.0


def is_quota_refusal(response: HttpAnswer) -> bool:
    """A 429 that an attempt's quota gave (final), not a rate limit's (try again later)."""
    if response.status_code != 429:
        return False
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return False
    return isinstance(body, dict) and body.get("code") == QuotaExceededError.code


def error_from_response(response: HttpAnswer) -> StoreError:
    """Rebuild the typed store error an ErrorBody names (`code` -> lightningstore.errors class)."""
    try:
        body = orjson.loads(response.content)
        code, message, details = body["code"], str(body["message"]), dict(body.get("details") or {})
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        code, message, details = (
            None,
            f"HTTP {response.status_code}: {response.content[:300].decode('utf-8', errors='replace')}",
            {},
        )
    cls = ERRORS_BY_CODE.get(code or "") or _STATUS_FALLBACK.get(response.status_code, StoreError)
    if code == "unavailable" or (cls is StoreError and response.status_code >= 500):
        cls = StoreUnavailableError if response.status_code in (502, 503, 504) else StoreError
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    if issubclass(cls, InvalidInputError):
        error.field = "body"  # type: ignore[attr-defined]
    for name in _ERROR_ATTRIBUTES:
        if name in details:
            setattr(error, name, details[name])
    error.status_code = response.status_code  # type: ignore[attr-defined]
    return error
