"""GroupCommitWriter: SQLite's one writer thread, committing every queued write call together.

SQLite allows one writer at a time, so concurrent write calls queue up anyway. Instead of one
transaction (BEGIN IMMEDIATE ... COMMIT) and one thread hop per call, the writer drains the
queue and runs the calls it found in ONE transaction, each inside its own SAVEPOINT: a call that
raises rolls back only its own statements and gets its own exception; the others commit
together. No caller hears back before the commit that holds its work, and a failed commit fails
every call of the group, so each call keeps all-or-nothing semantics.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

GROUP_LIMIT = 64
"""At most this many calls share a transaction (bounds the latency a large group adds)."""


@dataclass
class Call:
    """One queued write call; the writer fills `result` or `error`."""

    fn: Callable[[sa.Connection], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    result: Any = None
    error: BaseException | None = None


class GroupCommitWriter:
    """Runs write calls on one thread; `run_group` executes a list of calls in one transaction."""

    def __init__(self, run_group: Callable[[list[Call]], None], name: str = "lightningstore-write") -> None:
        self._run_group = run_group
        self._name = name
        self._queue: queue.SimpleQueue[Call | None] = queue.SimpleQueue()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[sa.Connection], Any]) -> asyncio.Future[Any]:
        """Queue `fn(conn)`; the returned future resolves (on the caller's loop) after the commit."""
        loop = asyncio.get_running_loop()
        call = Call(fn, loop, loop.create_future())
        with self._lock:  # never behind the stop sentinel that close() queues
            if self._closed:
                raise RuntimeError("the store is closed")
            if self._thread is None:
                # Started on the first write, as a thread pool would: an unused store holds none.
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._queue.put(call)
        return call.future

    def close(self) -> None:
        """Finish every queued call, then stop the thread."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
            if thread is not None:
                self._queue.put(None)
        if thread is not None:
            thread.join()

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            calls = [first]
            stop = False
            while len(calls) < GROUP_LIMIT:
                try:
                    call = self._queue.get_nowait()
                except queue.Empty:
                    break
                if call is None:
                    stop = True
                    break
                calls.append(call)
            try:
                self._run_group(calls)
            except BaseException as exc:  # noqa: BLE001 - every caller must hear back, whatever happened
                for call in calls:
                    call.error, call.result = exc, None
            _deliver(calls)
            if stop:
                return


def _deliver(calls: list[Call]) -> None:
    """Hand results back with one wake-up per event loop, not one per call."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Call]] = {}
    for call in calls:
        by_loop.setdefault(call.loop, []).append(call)
    for loop, group in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve, group)
        except RuntimeError:  # the loop was closed while the call ran: nobody is waiting
            pass


def _resolve(calls: list[Call]) -> None:
    for call in calls:
        if call.future.cancelled():
            continue
        if call.error is not None:
            call.future.set_exception(call.error)
        else:
            call.future.set_result(call.result)
