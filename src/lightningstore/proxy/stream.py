"""Streaming: upstream SSE events pass through chunk by chunk while the call is recorded.

The span is stored before the agent gets `[DONE]`. Token ids come from the chunks (`token_ids` per
choice, `prompt_token_ids` on the first chunk, as vLLM and our server send them with
`return_token_ids`); an upstream that sends none gives a span with the text only (`trainable=False`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx
import orjson
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from lightningstore.llm_record import CallRecord
from lightningstore.proxy.request import JSON, CallRequest
from lightningstore.proxy.shape import shape_for_agent

DONE = b"data: [DONE]\n\n"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
Finish = Callable[[], Awaitable[None]]


def event(data: JSON) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


def _error_of(data: JSON) -> tuple[int, str] | None:
    """(status, message) of an error event (`{"error": {...}}` without choices), else None."""
    error = data.get("error")
    if error is None or data.get("choices"):
        return None
    message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
    code = error.get("code") if isinstance(error, dict) else None
    return (code if isinstance(code, int) and 400 <= code < 600 else 500), str(message)


async def relay(
    response: httpx.Response, call: CallRequest, record: CallRecord, finish: Finish
) -> AsyncIterator[bytes]:
    """The agent's events: each upstream chunk recorded, then shaped; `finish` runs before [DONE]."""
    ended = False
    try:
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue  # blank separators and comments: each event is re-emitted with its own
            payload = line[5:].strip()
            if payload == "[DONE]":
                ended = True
                await finish()
                yield DONE
                return
            try:
                data = orjson.loads(payload)
            except orjson.JSONDecodeError:
                yield f"{line}\n\n".encode()
                continue
            if not isinstance(data, dict):
                yield f"{line}\n\n".encode()
                continue
            failure = _error_of(data)
            if failure is not None:
                record.status, record.error = failure[0], f"upstream stream error: {failure[1]}"
                yield event(data)
                continue
            record.absorb(data)
            yield event(shape_for_agent(data, call))
        ended = True
        await finish()  # the upstream ended without [DONE]: the agent still gets one, after the span
        yield DONE
    except httpx.HTTPError as error:
        record.status, record.error = 502, f"upstream stream broke: {type(error).__name__}: {error}"
        yield event({"error": {"message": record.error, "type": "server_error", "code": 502}})
    finally:
        with anyio.CancelScope(shield=True):
            await response.aclose()
            unfinished = not record.choices or any(c.finish_reason is None for c in record.choices.values())
            if not ended and record.error is None and unfinished:
                record.status, record.error = (
                    499,
                    "the stream stopped before every choice finished (client gone?)",
                )
            await finish()


async def one_chunk(data: JSON, finish: Finish) -> AsyncIterator[bytes]:
    """A whole answer sent as a single chunk, then [DONE] after the span is stored."""
    yield event(data)
    await finish()
    yield DONE


class RecordedStream(StreamingResponse):
    """A streaming response that always runs `finish` (span + gate), even if never iterated."""

    def __init__(self, content: AsyncIterator[bytes], finish: Finish, **kwargs: Any) -> None:
        super().__init__(content, media_type="text/event-stream", headers=SSE_HEADERS, **kwargs)
        self._finish = finish

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self._finish()
