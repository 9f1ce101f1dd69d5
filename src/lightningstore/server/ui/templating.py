"""The dashboard's Jinja2 environment (autoescaped HTML) and the filters its templates format values with."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from starlette.responses import HTMLResponse, Response
from starlette.templating import Jinja2Templates

from lightningstore.server.ui.access import COOKIE_PATH, CSRF_COOKIE, csrf_token

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")


def when(epoch: float | None) -> str:
    if epoch is None:
        return "—"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


def seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"


def number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


CONTROL_PICTURES = {c: 0x2400 + c for c in range(0x20) if chr(c) not in "\n\t"} | {0x7F: 0x2421}
"""Control characters shown as their Unicode pictures (NUL as ␀, CR as ␍): a browser would drop or fold
them, and a model's reply is shown as it was, byte for byte."""


def visible(text: str | None) -> str:
    return "" if text is None else text.translate(CONTROL_PICTURES)


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, default=str, ensure_ascii=False)


CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""Only the dashboard's own files run or style a page: no inline script or style attribute (a page's
script reads its settings from data attributes), nothing from elsewhere, never framed."""
ASSET_HEADERS = {"content-security-policy": CONTENT_SECURITY_POLICY, "x-content-type-options": "nosniff"}
SECURITY_HEADERS = {
    **ASSET_HEADERS,
    "cache-control": "no-store",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}
"""The pages show a store's data to a signed-in reader: never cached, framed or leaked by a referrer."""


def secured(response: Response) -> Response:
    """`response` with the pages' security headers (every /ui answer carries them)."""
    response.headers.update(SECURITY_HEADERS)
    return response


templates.env.filters.update(when=when, seconds=seconds, number=number, pretty=pretty, visible=visible)


def render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """Render `templates/<name>` with the request, the browser's form token (`csrf`) and `context`."""
    context.setdefault("caller", None)
    context.setdefault("active", None)
    csrf, new = csrf_token(request)
    response = templates.TemplateResponse(
        request, name, {"status_code": status, "csrf": csrf, **context}, status_code=status
    )
    if new:
        secure = request.url.scheme == "https"
        response.set_cookie(
            CSRF_COOKIE, csrf, path=COOKIE_PATH, httponly=True, samesite="strict", secure=secure
        )
    secured(response)
    return response
