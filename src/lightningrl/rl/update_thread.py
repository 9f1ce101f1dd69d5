"""The actor update on a thread of its own: Ctrl-C cannot interrupt it, so the run says so at once.

A policy update runs verl's forward/backward in C++ on a worker thread; Python cannot stop it. On the
first Ctrl-C the loop's await is cancelled but the thread goes on, and the process can only end when it
does: `run_update` prints, at once, what is running and what a second Ctrl-C does. `fit` stops at the
second one without waiting (`update_running` tells it a thread is still busy): the step being updated
is discarded either way, and the run resumes after the last completed step.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from rich.console import Console

T = TypeVar("T")

_running: set[int] = set()
_lock = threading.Lock()


def update_running() -> bool:
    """Whether an update thread is still computing (after its awaiting step was cancelled, too)."""
    with _lock:
        return bool(_running)


async def run_update(work: Callable[[], T], *, step: int, console: Console) -> T:
    """`work()` on a thread; when the awaiting task is cancelled (Ctrl-C), say what goes on and re-raise."""
    started = time.monotonic()

    def tracked() -> T:
        with _lock:
            _running.add(step)
        try:
            return work()
        finally:
            with _lock:
                _running.discard(step)

    try:
        return await asyncio.to_thread(tracked)
    except asyncio.CancelledError:
        if update_running():
            console.print(
                f"stopping: step {step}'s update has run {time.monotonic() - started:.0f} s on a thread that "
                "cannot be interrupted; waiting for it to end (its result is discarded, the run resumes "
                f"after step {step - 1}). Press Ctrl-C again to stop now.",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        raise
