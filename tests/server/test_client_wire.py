"""The StoreClient's own HTTP/1.1 transport (lightningstore.client.wire) against raw asyncio servers."""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from lightningstore.client.http_errors import StoreUnavailableError
from lightningstore.client.store_client import StoreClient
from lightningstore.client.wire import WirePool
from lightningstore.errors import NotFoundError

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> tuple[str, bytes]:
    """The request line and the body of one request."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return lines[0], await reader.readexactly(length) if length else b""


def answer(body: bytes, status: str = "200 OK", extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


async def test_sequential_requests_reuse_one_connection_and_keep_the_path_prefix() -> None:
    connections = 0
    seen: list[str] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            while True:
                line, body = await read_request(reader)
                seen.append(line)
                writer.write(answer(b'{"echo": %d}' % len(body)))
                await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()

    async with raw_server(handler) as url:
        pool = WirePool(url + "/prefix/", {}, timeout=5, max_connections=4)
        for k in range(5):
            response = await pool.request(
                "POST", "/v1/x", content=b"ab" * k, params={"a b": "c/d", "t": True}
            )
            assert response.status_code == 200 and response.content == b'{"echo": %d}' % (2 * k)
        await pool.aclose()
    assert connections == 1
    assert seen[0] == "POST /prefix/v1/x?a%20b=c%2Fd&t=true HTTP/1.1"


async def test_chunked_answer_and_connection_close_are_read() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n")
        writer.write(b"3\r\n[1,\r\n2\r\n2]\r\n0\r\n\r\n")
        await writer.drain()
        writer.close()

    async with raw_server(handler) as url:
        pool = WirePool(url, {}, timeout=5, max_connections=4)
        first = await pool.request("GET", "/a")
        second = await pool.request("GET", "/a")  # the first connection was closed: a new one
        assert first.content == second.content == b"[1,2]"
        await pool.aclose()


async def test_typed_errors_and_retry_after_come_back() -> None:
    calls = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        while True:
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            calls += 1
            if calls == 1:
                writer.write(
                    answer(
                        b'{"code":"rate_limited","message":"slow"}', "429 Too Many", "retry-after: 0.01\r\n"
                    )
                )
            else:
                body = b'{"code":"not_found","message":"rollout ro-x not found","details":{"kind":"rollout"}}'
                writer.write(answer(body, "404 Not Found"))
            await writer.drain()

    async with raw_server(handler) as url, StoreClient(url, max_retries=2) as client:
        with pytest.raises(NotFoundError) as caught:
            await client.cancel_rollout("ro-x")
        assert client.retries == 1 and getattr(caught.value, "kind", None) == "rollout"


async def test_a_server_that_hangs_up_or_stalls_is_unavailable_not_a_hang() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.close()

    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(5)

    async with raw_server(hang_up) as url, StoreClient(url, max_retries=2, retry_seconds=5) as client:
        with pytest.raises(StoreUnavailableError, match="closed the connection"):
            await client.query_workers()
        assert client.retries == 2
    async with raw_server(stall) as url:
        pool = WirePool(url, {}, timeout=0.2, max_connections=1)
        with pytest.raises(httpx.ReadTimeout):
            await pool.request("GET", "/slow")
        await pool.aclose()


class _KeepAliveHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"[]")

    def log_message(self, *args: object) -> None:
        pass


def test_one_pool_serves_two_event_loops_in_turn() -> None:
    """Connections belong to the loop that made them; a pool used from a new loop opens new ones."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _KeepAliveHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        pool = WirePool(f"http://127.0.0.1:{server.server_address[1]}", {}, timeout=5, max_connections=2)

        async def get() -> bytes:
            return (await pool.request("GET", "/")).content

        assert asyncio.run(get()) == b"[]"
        assert asyncio.run(get()) == b"[]"
    finally:
        server.shutdown()
        server.server_close()


def test_one_pool_on_uvloop() -> None:
    """The runner's event loop is uvloop's, whose transports are not asyncio.Transport instances."""
    import uvloop  # uvicorn[standard] brings it; the runner uses it when installed

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _KeepAliveHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        pool = WirePool(f"http://127.0.0.1:{server.server_address[1]}", {}, timeout=5, max_connections=2)

        async def get_three() -> list[bytes]:
            return [(await pool.request("GET", "/")).content for _ in range(3)]

        assert uvloop.run(get_three()) == [b"[]"] * 3
    finally:
        server.shutdown()
        server.server_close()
