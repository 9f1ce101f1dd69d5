"""Per-request authorisation: the bearer token becomes a Caller (401 when missing or unknown).

Routes call `context(request)` directly instead of FastAPI dependencies: dependency resolution costs
more per request than the whole check. The OpenAPI document declares the bearer scheme globally.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from starlette.exceptions import HTTPException

from lightningstore.server.tokens import Caller, TokenConfig
from lightningstore.store import LightningStore

SECURITY_SCHEME = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "A role token or an agent key."}
}


def current_caller(request: Request) -> Caller:
    """Resolve the request's `Authorization: Bearer` token against the app's TokenConfig."""
    tokens: TokenConfig = request.app.state.tokens
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip() if scheme.lower() == "bearer" else ""
    caller = tokens.resolve(token or None)
    if caller is None:
        raise HTTPException(401, "unknown or invalid bearer token" if token else "missing bearer token")
    return caller


async def caller_dependency(request: Request) -> Caller:
    """`current_caller` as a FastAPI dependency (for routers outside the store API, e.g. the proxy)."""
    return current_caller(request)


CallerDep = Annotated[Caller, Depends(caller_dependency)]


def context(request: Request) -> tuple[LightningStore, Caller]:
    """The app's store and the authenticated caller of this request."""
    return request.app.state.store, current_caller(request)


def declare_bearer_security(app: FastAPI) -> None:
    """Add the bearer scheme to the generated OpenAPI document (every /v1 operation uses it)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schema.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEME
            for path, operations in schema.get("paths", {}).items():
                if path.startswith("/v1/"):
                    for operation in operations.values():
                        operation["security"] = [{"bearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
