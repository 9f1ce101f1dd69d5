"""ASGI middleware that refuses request bodies over a byte limit with 413 and a reason."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lightningstore.server.error_handlers import error_response


class BodyRefused(HTTPException):
    """Raised inside `receive` when a streamed body passes a limit (an HTTPException, so FastAPI's body
    reader passes it through to the app's handler); BodyLimitMiddleware answers it when raised elsewhere."""

    code = "payload_too_large"


class BodyTooLarge(BodyRefused):
    """A streamed body past the server's byte limit (413)."""

    def __init__(self, reason: str) -> None:
        super().__init__(413, reason)


class BodyLimitMiddleware:
    """Checks Content-Length up front and counts streamed (chunked) bodies as they arrive."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    def _reason(self, size: str) -> str:
        return f"request body of {size} bytes exceeds the limit of {self.max_body_bytes} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        for name, value in scope["headers"]:
            if name == b"content-length":
                if not value.isdigit() or int(value) > limit:
                    reason = self._reason(value.decode("latin-1")[:30])
                    await error_response(413, "payload_too_large", reason)(scope, receive, send)
                    return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(self._reason(f"at least {received}"))
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyRefused as exc:
            if not started:
                await error_response(exc.status_code, exc.code, exc.detail)(scope, receive, send)
