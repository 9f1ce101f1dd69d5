"""Per-request authorisation: the bearer token becomes a Caller (401 when missing or unknown).

Routes call `current_caller(request)` directly instead of FastAPI dependencies: dependency resolution
costs more per request than the whole check. Every router mounted on the store server (store, proxy,
gate) identifies its caller here, against the app's `state.tokens`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from starlette.exceptions import HTTPException

from lightningstore.auth.tokens import Caller, TokenConfig

CALLER_SCOPE_KEY = "lightningstore.caller"
"""Where the server's admission keeps the caller it resolved from the headers (before the body)."""


def current_caller(request: Request) -> Caller:
    """Resolve the request's `Authorization: Bearer` token against the app's TokenConfig (once: the
    caller admission already resolved for this request is reused)."""
    admitted = request.scope.get(CALLER_SCOPE_KEY)
    if admitted is not None:
        return admitted
    caller = resolve_authorization(request.app.state.tokens, request.headers.get("authorization", ""))
    if isinstance(caller, str):
        raise HTTPException(401, caller)
    return caller


def resolve_authorization(tokens: TokenConfig, header: str) -> Caller | str:
    """The caller an `Authorization: Bearer` header names, or why there is none (the 401's reason)."""
    scheme, _, token = header.partition(" ")
    token = token.strip() if scheme.lower() == "bearer" else ""
    caller = tokens.resolve(token or None)
    if caller is None:
        return "unknown or invalid bearer token" if token else "missing bearer token"
    return caller


async def caller_dependency(request: Request) -> Caller:
    """`current_caller` as a FastAPI dependency (for routes off the hot path)."""
    return current_caller(request)


CallerDep = Annotated[Caller, Depends(caller_dependency)]
