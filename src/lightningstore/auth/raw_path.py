"""Route on the undecoded path so ids holding '/' or '%' survive; `IdConvertor` decodes them once.

Shared, like the bearer check, by every router on the store server (store API, proxy, gate).
"""

from __future__ import annotations

from urllib.parse import unquote

from starlette.convertors import Convertor, register_url_convertor
from starlette.types import ASGIApp, Receive, Scope, Send


class IdConvertor(Convertor[str]):
    """A path segment holding a percent-encoded id (`{rollout_id:id}`)."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return unquote(value)

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("id", IdConvertor())


class RawPathMiddleware:
    """Replace the decoded `path` with `raw_path`: an encoded '/' (%2F) then stays inside its segment."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw:
            scope = dict(scope)
            scope["path"] = raw.decode("latin-1")
        await self.app(scope, receive, send)
