"""The store routes' request context (store and caller) and the bearer scheme in the OpenAPI document.

The caller itself is resolved by `lightningstore.auth.bearer`, shared with the proxy and gate routes;
a write's caller was already resolved from its head (`head_caller`, before its body was read) and is
kept in the request's scope under `auth.bearer.CALLER_SCOPE_KEY`, where `current_caller` finds it.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from starlette.responses import Response

from lightningstore.auth.bearer import current_caller, resolve_authorization
from lightningstore.auth.tokens import Caller, Role, TokenConfig
from lightningstore.server.error_handlers import error_response
from lightningstore.store import LightningStore

SECURITY_SCHEME = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "A role token or an agent key."}
}


def context(request: Request) -> tuple[LightningStore, Caller]:
    """The app's store and the authenticated caller of this request; an agent key's span writes count
    against its attempt's quota (`attempt_quota`)."""
    caller = current_caller(request)
    store = request.app.state.store
    if caller.role is Role.AGENT:
        ledger = getattr(request.app.state, "quota_ledger", None)
        if ledger is not None:
            store = ledger.store_for(store, caller)
    return store, caller


def head_caller(tokens: TokenConfig, authorization: bytes | None) -> Caller | Response:
    """The caller an `Authorization` header names, or the 401 a route would answer (as `current_caller`)."""
    caller = resolve_authorization(tokens, (authorization or b"").decode("latin-1"))
    return error_response(401, "unauthorized", caller) if isinstance(caller, str) else caller


def declare_bearer_security(app: FastAPI) -> None:
    """Add the bearer scheme to the generated OpenAPI document (every /v1 and /api operation uses it)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schema.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEME
            for path, operations in schema.get("paths", {}).items():
                if path.startswith(("/v1/", "/api/")):
                    for operation in operations.values():
                        operation["security"] = [{"bearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
