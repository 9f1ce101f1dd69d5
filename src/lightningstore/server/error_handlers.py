"""Every failure becomes a JSON ErrorBody with a status and a reason; the client maps `code` back."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import orjson
import sqlalchemy.exc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from lightningstore.errors import StoreError

log = logging.getLogger("lightningstore.server")

HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    429: "rate_limited",
    507: "insufficient_storage",
}
SQLITE_FULL = 13
"""sqlite3's result code for 'database or disk is full'."""
PG_DISK_FULL = "53100"
"""PostgreSQL's SQLSTATE disk_full."""
ERROR_ATTRIBUTES = ("field", "kind", "ident", "current", "new")


def error_response(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> Response:
    body = {"code": code, "message": message, "details": details or {}}
    headers = {"www-authenticate": "Bearer"} if status == 401 else None
    return Response(
        orjson.dumps(body, default=str), status_code=status, media_type="application/json", headers=headers
    )


def _store_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StoreError)
    details = {name: getattr(exc, name) for name in ERROR_ATTRIBUTES if hasattr(exc, name)}
    return error_response(exc.http_status, exc.code, str(exc), details)


def _field_of(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if errors and tuple(errors[0]["loc"]) == ("body",) and isinstance(errors[0].get("input"), bytes):
        # FastAPI left the body unparsed: its content type is not one it reads as JSON (`text/json`, none).
        given = request.headers.get("content-type", "none")
        reason = f"the body must be JSON sent as application/json (content type: {given[:100]})"
        return error_response(415, "unsupported_media_type", reason, {"field": "content-type"})
    if errors and errors[0].get("type") == "json_invalid":
        error = errors[0]
        reason = (error.get("ctx") or {}).get("error", error["msg"])
        where = error["loc"][-1] if len(error["loc"]) > 1 else "?"
        return error_response(400, "bad_request", f"malformed JSON body at position {where}: {reason}")
    reasons = []
    for err in errors[:5]:
        given = err.get("input")
        shown = repr(given)[:100] if err.get("type") != "missing" else None
        reasons.append(f"{_field_of(tuple(err['loc']))}: {err['msg']}" + (f" (got {shown})" if shown else ""))
    names = [p for p in errors[0]["loc"][1:] if isinstance(p, str)] if errors else []
    field = names[0] if names else "body"
    return error_response(422, "invalid_input", "; ".join(reasons) or "invalid request", {"field": field})


def _http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    # An exception that names its own code (a body refused for a quota, say) keeps it.
    code = getattr(exc, "code", None) or HTTP_CODES.get(exc.status_code, "http_error")
    return error_response(exc.status_code, code, str(exc.detail))


def _bad_value(_: Request, exc: Exception) -> Response:
    # The database refused a value (NUL in PostgreSQL text, an integer too large, JSON nested too deep).
    reason = getattr(exc, "orig", None) or exc
    return error_response(422, "invalid_input", f"value refused by the database: {reason}", {"field": "body"})


def _disk_full(orig: BaseException | None) -> bool:
    return (
        getattr(orig, "sqlite_errorcode", None) == SQLITE_FULL
        or getattr(orig, "sqlstate", None) == PG_DISK_FULL
    )


def _database_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, sqlalchemy.exc.DataError) or not isinstance(exc, sqlalchemy.exc.DBAPIError):
        return _bad_value(request, exc)
    if _disk_full(exc.orig):
        # The transaction rolled back whole; the same write succeeds once space returns.
        log.warning("database full in %s %s: %s", request.method, request.url.path, exc.orig)
        return error_response(
            507, "insufficient_storage", f"database storage is full, nothing written: {exc.orig}"
        )
    # Locked, disconnected or restarting database: worth a retry, so 503 rather than a 4xx.
    log.warning("database error in %s %s: %s", request.method, request.url.path, exc)
    return error_response(503, "store_error", f"database unavailable: {type(exc.orig).__name__}")


def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error in %s %s", request.method, request.url.path)
    return error_response(500, "store_error", f"internal error: {type(exc).__name__}")


HANDLERS: dict[type[Exception], Callable[[Request, Exception], Response]] = {
    StoreError: _store_error,
    RequestValidationError: _validation_error,
    StarletteHTTPException: _http_error,
    sqlalchemy.exc.StatementError: _database_error,
    OverflowError: _bad_value,
    Exception: _unexpected,
}


def install_error_handlers(app: FastAPI) -> None:
    for kind, handler in HANDLERS.items():
        app.add_exception_handler(kind, handler)


def answer_error(request: Request, exc: Exception) -> Response:
    """The answer the app's handlers give `exc` (the nearest class in its MRO, as Starlette picks)."""
    for kind in type(exc).__mro__:
        handler = HANDLERS.get(kind)
        if handler is not None:
            return handler(request, exc)
    return _unexpected(request, exc)
