"""ClaimSignal: hands each rollout queued in this process to one waiting claim.

A claim that finds the queue empty may wait (`dequeue_many_rollouts(wait=...)`) instead of being
asked again and again: each commit that queues n rollouts releases n permits, and each permit wakes
one waiting claim, which then claims (a semaphore, not a broadcast, so one enqueue does not wake
every idle runner to find the rollout gone). The count is a hint, never the truth: a claim that
succeeds takes a permit if one is there, a permit whose rollout was claimed elsewhere costs one
empty claim, and rollouts queued by another process release nothing here, which is why waiters
also look again every CLAIM_POLL_SECONDS. Thread-safe: commits release from writer threads, and
waiters may sit on several event loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque

CLAIM_POLL_SECONDS = 1.0
"""A waiting claim looks again at least this often (for rollouts queued by other processes)."""


class ClaimSignal:
    """A counting semaphore across threads and event loops: `release(n)` after a commit, `acquire(timeout)` to wait."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._permits = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def release(self, n: int) -> None:
        """`n` rollouts became claimable: wake up to `n` waiters, keep the rest as permits."""
        with self._lock:
            self._permits += n
            while self._permits > 0 and self._waiters:
                waiter = self._waiters.popleft()
                try:
                    waiter.get_loop().call_soon_threadsafe(_wake, waiter)
                except RuntimeError:  # its event loop is closed: nobody waits there any more
                    continue
                self._permits -= 1

    def take(self, n: int) -> None:
        """A claim got `n` rollouts without waiting: drop as many permits as there are (their rollouts are gone)."""
        with self._lock:
            self._permits = max(0, self._permits - n)

    async def acquire(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a permit; True if one came (the caller should claim now)."""
        with self._lock:
            if self._permits > 0:
                self._permits -= 1
                return True
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
            return True
        except TimeoutError:
            return self._withdraw(waiter)  # True: a release handed it a permit just as it timed out
        except asyncio.CancelledError:
            if self._withdraw(waiter):
                self.release(1)  # pass the permit it was handed on to the next waiter
            raise

    def _withdraw(self, waiter: asyncio.Future[None]) -> bool:
        """Take a waiter that stops waiting out of the queue; True if a release had already given it a permit."""
        with self._lock:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
                return False
            return True


def _wake(waiter: asyncio.Future[None]) -> None:
    with contextlib.suppress(asyncio.InvalidStateError):
        waiter.set_result(None)
