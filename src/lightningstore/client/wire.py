"""WirePool: a lean HTTP/1.1 transport — keep-alive connections parsed by httptools.

Used by the StoreClient for every store call and by the model gateway for non-streamed upstream calls.

httpx spends most of a small request's CPU in its own layers (URL parsing, h11, anyio, pool
bookkeeping): on the store's workload the client cost more CPU than the server. The store server
speaks plain HTTP/1.1 with Content-Length answers, so the StoreClient talks to it over asyncio
connections of its own: one request in flight per connection, idle connections reused (LIFO), an
answer parsed by httptools (the C parser uvicorn uses). Failures surface as httpx's transport errors,
so the client's retry rules read the same for both transports; `StoreClient(transport=...)` (tests,
ASGI apps) still goes through httpx.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import quote, urlsplit

import httptools
import httpx

IDLE_REUSE_SECONDS = 2.0
"""An idle connection older than this is closed, not reused: servers drop idle keep-alive connections
(uvicorn after 5 s by default), and a request sent as one closes would fail without reaching it."""


@dataclass(slots=True)
class WireResponse:
    """What the StoreClient reads of an answer (the same names as httpx.Response)."""

    status_code: int
    headers: dict[str, str]
    """Lower-cased names."""
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


@dataclass(slots=True, eq=False)
class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; one request at a time."""

    transport: asyncio.Transport | None = None
    parser: Any = None
    waiter: asyncio.Future[WireResponse] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: list[bytes] = field(default_factory=list)
    closed: bool = False
    got_bytes: bool = False
    keep_alive: bool = True
    idle_since: float = 0.0

    # ---- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # No isinstance check: uvloop's TCPTransport (the runner's loop) is not an asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.got_bytes = True
        if self.waiter is None or self.parser is None:
            self._fail(httpx.RemoteProtocolError("the server sent bytes no request asked for"))
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed HTTP answer: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            reason = f": {exc!r}" if exc else ""
            self.waiter.set_exception(httpx.RemoteProtocolError(f"the server closed the connection{reason}"))

    # ---- httptools callbacks --------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        parser, waiter = self.parser, self.waiter
        if waiter is None or waiter.done() or parser is None:
            return
        self.keep_alive = parser.should_keep_alive()
        waiter.set_result(WireResponse(parser.get_status_code(), self.headers, b"".join(self.body)))

    # ---- use --------------------------------------------------------------------------------

    def _fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            try:
                self.transport.close()
            except RuntimeError:  # its event loop is closed already: the socket went with it
                pass

    async def send(self, request: bytes) -> WireResponse:
        assert self.transport is not None and self.waiter is None
        self.waiter = asyncio.get_running_loop().create_future()
        self.parser = httptools.HttpResponseParser(self)
        self.headers = {}
        self.body = []
        self.got_bytes = False
        try:
            self.transport.write(request)
            return await self.waiter
        finally:
            self.waiter = None
            self.parser = None


def _query(params: Mapping[str, Any]) -> str:
    parts = []
    for key, value in params.items():
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        parts.append(f"{quote(key, safe='')}={quote(text, safe='')}")
    return "&".join(parts)


class WirePool:
    """Keep-alive connections to one origin, at most `max_connections` at a time."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        timeout: float,
        max_connections: int,
        connect_timeout: float | None = None,
    ) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"base_url must be http(s)://host[:port][/prefix], got {base_url!r}")
        self._host = url.hostname
        self._port = url.port or (443 if url.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if url.scheme == "https" else None
        self._prefix = url.path.rstrip("/")
        host_header = url.netloc.rsplit("@", 1)[-1]
        fixed = {"host": host_header, "user-agent": "lightningstore", "accept": "application/json", **headers}
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items()).encode("latin-1")
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._max_connections = max_connections
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Connections belong to one event loop: a client used from a new one starts afresh."""
        if loop is not self._loop:
            for conn in self._open:
                conn.close()
            self._open.clear()
            self._idle.clear()
            self._slots = asyncio.Semaphore(self._max_connections)
            self._loop = loop

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, conn = await loop.create_connection(
                    _Connection,
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._host if self._ssl else None,
                )
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"no connection to {self._host}:{self._port} in time") from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(f"cannot connect to {self._host}:{self._port}: {exc!r}") from exc
        self._open.add(conn)
        return conn

    def _take_idle(self, now: float) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            fresh = now - conn.idle_since < IDLE_REUSE_SECONDS
            if fresh and not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn
            conn.close()
            self._open.discard(conn)
        return None

    async def request(
        self,
        method: str,
        path: str,
        *,
        content: bytes | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> WireResponse:
        target = self._prefix + path + (f"?{_query(params)}" if params else "")
        head = [f"{method} {target} HTTP/1.1\r\n".encode("latin-1"), self._fixed]
        if headers:
            head.append("".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1"))
        if content is not None or method in ("POST", "PUT", "PATCH"):
            head.append(b"content-length: %d\r\n" % len(content or b""))
        head.append(b"\r\n")
        if content:
            head.append(content)
        request = b"".join(head)
        loop = asyncio.get_running_loop()
        self._bind(loop)
        async with self._slots:
            conn = self._take_idle(loop.time()) or await self._connect()
            try:
                async with asyncio.timeout(self._timeout if timeout is None else timeout):
                    response = await conn.send(request)
            except TimeoutError as exc:
                conn.close()
                self._open.discard(conn)
                raise httpx.ReadTimeout(f"{method} {path}: no answer in time") from exc
            except BaseException:
                conn.close()
                self._open.discard(conn)
                raise
            if conn.keep_alive and not conn.closed:
                conn.idle_since = loop.time()
                self._idle.append(conn)
            else:
                conn.close()
                self._open.discard(conn)
            return response

    async def aclose(self) -> None:
        for conn in list(self._open):
            conn.close()
        self._open.clear()
        self._idle.clear()
