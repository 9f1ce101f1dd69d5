"""PauseSwitch: pause new calls, wait for in-flight ones to drain, resume (around weight updates)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from lightningstore.proxy.errors import ProxyError


class PauseSwitch:
    """Counts calls in flight; while paused, new calls wait (bounded) instead of failing."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.in_flight = 0
        self.waiting = 0
        self.completed = 0

    @property
    def paused(self) -> bool:
        return not self._open.is_set()

    async def enter(self, wait_s: float) -> None:
        """Admit one call, waiting up to `wait_s` while paused (then ProxyError 503)."""
        if self.paused:
            self.waiting += 1
            try:
                await asyncio.wait_for(self._open.wait(), wait_s)
            except TimeoutError:
                raise ProxyError(
                    503, f"the model gateway is paused (weight update) and stayed paused for {wait_s} s"
                ) from None
            finally:
                self.waiting -= 1
        self.in_flight += 1
        self._idle.clear()

    def leave(self) -> None:
        """One admitted call has finished (its span is stored)."""
        self.in_flight -= 1
        self.completed += 1
        if self.in_flight == 0:
            self._idle.set()

    def pause(self) -> None:
        self._open.clear()

    def resume(self) -> None:
        self._open.set()

    async def drain(self, timeout_s: float) -> dict[str, Any]:
        """Wait until no call is in flight (at most `timeout_s`); the counts afterwards."""
        started = time.monotonic()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
            drained = True
        except TimeoutError:
            drained = False
        return {
            **self.counts(),
            "drained": drained,
            "waited_ms": round((time.monotonic() - started) * 1e3, 3),
        }

    def counts(self) -> dict[str, Any]:
        return {
            "paused": self.paused,
            "in_flight": self.in_flight,
            "waiting": self.waiting,
            "completed": self.completed,
        }
