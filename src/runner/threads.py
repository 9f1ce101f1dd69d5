"""Run a blocking agent in its own daemon thread so a hung one never blocks the event loop or a pool."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import threading
from collections.abc import Callable
from typing import Any

_names = itertools.count(1)


def run_in_daemon_thread(func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """A future for `func(*args)` run in a fresh daemon thread with the caller's contextvars.

    Cancelling the future abandons the thread (Python cannot kill it); its result is dropped.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(error: BaseException | None, value: Any) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value = context.run(func, *args)
        except BaseException as error:  # noqa: BLE001 - handed to the awaiting task
            _post(loop, settle, error, None)
        else:
            _post(loop, settle, None, value)

    threading.Thread(target=target, name=f"lightningrl-agent-{next(_names)}", daemon=True).start()
    return future


def _post(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:
        pass  # the loop closed while the abandoned thread ran
