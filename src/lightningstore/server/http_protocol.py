"""CoalescingHttpToolsProtocol: uvicorn's httptools protocol, each answer's head and body in one write.

uvicorn writes a response's head (at `http.response.start`) and its body as two `transport.write`
calls: two send system calls and two TCP segments per answer, and a client that wakes for each; a
rollout takes about a dozen answers, so that second write is one of the server's larger costs. Here the protocol's transport holds a final response head until the next
write (the body) and sends both at once; a head that nothing follows within the same turn of the
event loop (HEAD, 204, 304, a streamed body) goes out on its own, in order, on the loop's next turn.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeadCoalescingTransport:
    """Delegates to `transport`; a response head waits for the write after it (or the loop's next turn)."""

    __slots__ = ("_transport", "_loop", "_head")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._head: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head + bytes(data))
            return
        if _is_final_head(data):
            self._head = bytes(data)
            self._loop.call_soon(self.flush)
            return
        self._transport.write(data)

    def writelines(self, chunks: Any) -> None:
        self.write(b"".join(chunks))

    def flush(self) -> None:
        """Send a held head now (nothing followed it)."""
        head = self._head
        if head is not None:
            self._head = None
            if not self._transport.is_closing():
                self._transport.write(head)

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._head = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _is_final_head(data: bytes | bytearray | memoryview) -> bool:
    """A whole response head other than an interim 1xx (`100 Continue` must not wait)."""
    return (
        isinstance(data, bytes)
        and data.startswith(b"HTTP/1.")
        and data.endswith(b"\r\n\r\n")
        and data[9:10] != b"1"
    )


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol over a HeadCoalescingTransport."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(HeadCoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
