"""The API's description (`/openapi.json`, `/docs`, `/redoc`), for callers with a valid token only.

The document lists every route and model of the store, the gateway and the gate: with tokens
configured it answers a request that carries a valid bearer token (any role, or an agent key), and
401 otherwise; in dev mode (no tokens) anyone may read it, as every other route. The interactive
pages fetch the document from the browser without the token, so with tokens they serve a reader who
sends the header; `curl -H "Authorization: Bearer $T" URL/openapi.json` works everywhere.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from starlette.responses import HTMLResponse, JSONResponse

from lightningstore.auth.bearer import current_caller

OPENAPI_URL = "/openapi.json"


def install_api_docs(app: FastAPI) -> None:
    """Serve the OpenAPI document and its two pages behind the bearer check (the app was built with
    `openapi_url=None`, so FastAPI serves none of them unguarded)."""

    @app.get(OPENAPI_URL, include_in_schema=False)
    async def openapi(request: Request) -> JSONResponse:
        current_caller(request)
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    async def swagger(request: Request) -> HTMLResponse:
        current_caller(request)
        return get_swagger_ui_html(openapi_url=OPENAPI_URL, title=f"{app.title} API")

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        current_caller(request)
        return get_redoc_html(openapi_url=OPENAPI_URL, title=f"{app.title} API")
