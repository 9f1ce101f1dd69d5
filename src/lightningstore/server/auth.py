"""The store routes' request context (store and caller) and the bearer scheme in the OpenAPI document.

The caller itself is resolved by `lightningstore.auth.bearer`, shared with the proxy and gate routes.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from lightningstore.auth.bearer import current_caller
from lightningstore.auth.tokens import Caller
from lightningstore.store import LightningStore

SECURITY_SCHEME = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "A role token or an agent key."}
}


def context(request: Request) -> tuple[LightningStore, Caller]:
    """The app's store and the authenticated caller of this request."""
    return request.app.state.store, current_caller(request)


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
