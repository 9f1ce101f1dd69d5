"""The FastAPI dependency that turns a bearer token into a Caller (401 when missing or unknown)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from lightningstore.server.tokens import Caller, TokenConfig

bearer = HTTPBearer(auto_error=False, description="A role token or a per-attempt agent key.")


def current_caller(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> Caller:
    """Resolve the request's bearer token against the app's TokenConfig."""
    tokens: TokenConfig = request.app.state.tokens
    token = credentials.credentials if credentials is not None else None
    caller = tokens.resolve(token)
    if caller is None:
        reason = "missing bearer token" if not token else "unknown or invalid bearer token"
        raise HTTPException(401, reason)
    return caller


CallerDep = Annotated[Caller, Depends(current_caller)]
