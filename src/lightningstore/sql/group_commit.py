"""GroupCommitWriter: SQLite's one writer, committing the write calls of a moment together.

SQLite allows one writer at a time, so concurrent write calls queue up anyway. Instead of one
transaction (BEGIN IMMEDIATE ... COMMIT) per call, the writer runs the calls queued on an event
loop in ONE transaction, each inside its own SAVEPOINT: a call that raises rolls back only its
own statements and gets its own exception; the others commit together. No caller hears back
before the commit that holds its work, and a failed commit fails every call of the group, so
each call keeps all-or-nothing semantics.

The group runs on the event loop's own thread, at the end of the loop turn in which its first call
was queued (the calls queued in that turn join it); while more calls keep arriving turn after turn,
it waits up to MAX_WAIT_TURNS more turns for them, since each commit costs about the same whatever
its size. A lone call commits after one turn. The writer is not a thread of its own because a call
would then pay a hand-off to it and a wake-up back, and the two threads would fight over the GIL
(the figures: bench/README.md, "Figures behind design choices"). A call its caller marks `heavy` (a
large batch) runs on a helper thread instead,
so the loop keeps serving while it commits; calls queued on that loop meanwhile wait for it and
follow. Several event loops (threads) sharing one store each run their own groups, and SQLite's lock
makes them take turns.

With `offload=True` (PostgreSQL, whose statements wait on the network) every group runs on the
helper thread instead, one group at a time per loop: the calls that arrive while a group commits
form the next one, so under load a transaction carries many calls and a call costs a fraction of a
BEGIN/COMMIT round trip and of a thread hop.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

GROUP_LIMIT = 64
"""At most this many calls share a transaction (bounds the time one group holds the loop)."""
MAX_WAIT_TURNS = 3
"""While calls keep arriving, a group waits up to this many more loop turns for more to join."""
CLOSE_WAIT_SECONDS = 60.0
"""How long `close()` waits for queued calls to commit."""


@dataclass
class Call:
    """One queued write call; the writer fills `result` or `error`."""

    fn: Callable[[sa.Connection], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    heavy: bool = False
    result: Any = None
    error: BaseException | None = None


@dataclass
class _LoopQueue:
    """The calls queued on one event loop, and whether a flush is due or a group runs off the loop."""

    loop: asyncio.AbstractEventLoop
    calls: deque[Call] = field(default_factory=deque)
    scheduled: bool = False
    busy: bool = False
    """One of its groups runs off the loop now (the next waits for it)."""
    seen: int = 0
    """How many calls were queued when the flush last looked (or was scheduled)."""
    waited: int = 0
    """How many loop turns the queued group has waited for more calls."""


class GroupCommitWriter:
    """`submit(fn)` queues a write call; `run_group` executes a list of calls in one transaction."""

    def __init__(
        self,
        run_group: Callable[[list[Call]], None],
        name: str = "lightningstore-write",
        *,
        offload: bool = False,
    ) -> None:
        self._run_group = run_group
        self._name = name
        self._offload = offload
        self._queues: dict[asyncio.AbstractEventLoop, _LoopQueue] = {}
        """The loops with calls queued or running (an entry goes once its queue is drained)."""
        self._closed = False
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._helper: ThreadPoolExecutor | None = None

    def submit(self, fn: Callable[[sa.Connection], Any], *, heavy: bool = False) -> asyncio.Future[Any]:
        """Queue `fn(conn)`; the returned future resolves (on the caller's loop) after the commit."""
        loop = asyncio.get_running_loop()
        call = Call(fn, loop, loop.create_future(), heavy)
        with self._lock:
            if self._closed:
                raise RuntimeError("the store is closed")
            queue = self._queues.get(loop)
            if queue is None:
                queue = self._queues[loop] = _LoopQueue(loop)
            queue.calls.append(call)
            if not (queue.scheduled or queue.busy):
                self._schedule(queue)
        return call.future

    def close(self) -> None:
        """Refuse new calls, wait (bounded) until the queued ones have committed, stop the helper."""
        with self._lock:
            self._closed = True
            self._idle.wait_for(self._drained, CLOSE_WAIT_SECONDS)
            helper, self._helper = self._helper, None
        if helper is not None:
            helper.shutdown(wait=True)

    def _drained(self) -> bool:
        """No call is queued or running on a loop that could still run it."""
        return not any(
            (queue.calls or queue.busy) and not loop.is_closed() for loop, queue in list(self._queues.items())
        )

    def _flush(self, queue: _LoopQueue) -> None:
        """Run the loop's queued calls, a group of light ones at a time, until a heavy one (or, offloaded,
        any group) goes to the helper thread or none is left."""
        while True:
            with self._lock:
                queue.scheduled = False
                if queue.busy:
                    return
                if not queue.calls:
                    self._forget(queue)
                    return
                if self._wait_for_more(queue):
                    return
                group = [queue.calls.popleft()]
                if not group[0].heavy:
                    while queue.calls and len(group) < GROUP_LIMIT and not queue.calls[0].heavy:
                        group.append(queue.calls.popleft())
                off_loop = queue.busy = self._offload or group[0].heavy
            if off_loop:
                break
            self._run(group)
            _resolve(group)
        helper = self._helper_pool()
        done = queue.loop.run_in_executor(helper, self._run, group)
        done.add_done_callback(lambda _: self._after_off_loop(queue, group))

    def _schedule(self, queue: _LoopQueue) -> None:
        """Flush the queue's calls at the end of this loop turn (under the lock); a fresh group."""
        queue.scheduled = True
        queue.seen, queue.waited = len(queue.calls), 0
        queue.loop.call_soon(self._flush, queue)

    def _wait_for_more(self, queue: _LoopQueue) -> bool:
        """Put the flush off a turn while calls are still arriving (a commit costs about the same
        whatever its size); a lone call, or a queue quiet for a turn, commits at once."""
        count = len(queue.calls)
        if count <= queue.seen or count >= GROUP_LIMIT or queue.waited >= MAX_WAIT_TURNS:
            return False
        queue.seen, queue.waited = count, queue.waited + 1
        queue.scheduled = True
        queue.loop.call_soon(self._flush, queue)
        return True

    def _after_off_loop(self, queue: _LoopQueue, group: list[Call]) -> None:
        _resolve(group)
        with self._lock:
            queue.busy = False
            if queue.calls and not queue.scheduled:
                self._schedule(queue)
            elif not queue.calls:
                self._forget(queue)

    def _forget(self, queue: _LoopQueue) -> None:
        """Drop a drained queue (under the lock); the next call on its loop starts a new one."""
        if self._queues.get(queue.loop) is queue:
            del self._queues[queue.loop]
        self._idle.notify_all()

    def _run(self, calls: list[Call]) -> None:
        try:
            self._run_group(calls)
        except BaseException as exc:  # noqa: BLE001 - every caller must hear back, whatever happened
            for call in calls:
                call.error, call.result = exc, None

    def _helper_pool(self) -> ThreadPoolExecutor:
        # Started on the first call it runs, as a thread pool would: a store that never needs it holds none.
        with self._lock:
            if self._helper is None:
                self._helper = ThreadPoolExecutor(1, thread_name_prefix=self._name)
            return self._helper


def _resolve(calls: list[Call]) -> None:
    for call in calls:
        if call.future.cancelled():
            continue
        if call.error is not None:
            call.future.set_exception(call.error)
        else:
            call.future.set_result(call.result)
