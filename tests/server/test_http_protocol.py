"""HeadCoalescingTransport: a response head goes out with its body in one write, and nothing is held back."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from lightningstore.server.http_protocol import HeadCoalescingTransport

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


class Recording:
    """A transport that records what is written to it."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


def wrap() -> tuple[HeadCoalescingTransport, Recording]:
    inner = Recording()
    return HeadCoalescingTransport(cast(asyncio.Transport, inner), asyncio.get_running_loop()), inner


async def test_head_and_body_go_out_in_one_write() -> None:
    transport, inner = wrap()
    transport.write(HEAD)
    assert inner.writes == []
    transport.write(b"{}")
    assert inner.writes == [HEAD + b"{}"]
    transport.write(b"more")  # not a head: straight through
    assert inner.writes == [HEAD + b"{}", b"more"]
    await asyncio.sleep(0)
    assert inner.writes == [HEAD + b"{}", b"more"]


async def test_a_head_without_a_body_goes_out_on_the_next_turn() -> None:
    transport, inner = wrap()
    transport.write(HEAD)
    await asyncio.sleep(0)
    assert inner.writes == [HEAD]
    transport.write(HEAD)
    transport.close()  # closing sends what is held first
    assert inner.writes == [HEAD, HEAD] and inner.closed


async def test_interim_answers_are_not_held_and_the_rest_is_delegated() -> None:
    transport, inner = wrap()
    transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert inner.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    assert transport.get_extra_info("peername") == ("127.0.0.1", 1)
    transport.write(HEAD)
    transport.abort()  # the connection is dropped: nothing more goes out
    await asyncio.sleep(0)
    assert inner.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"] and inner.aborted
