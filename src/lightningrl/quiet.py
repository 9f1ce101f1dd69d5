"""quiet_third_party: keep transformers', verl's and torch's chatter off the console during our calls.

A user reads a training run's console; per-step "Loading weights" / "Writing model shards" bars, verl's
"megatron engine is not available" import warnings and its `print`s while it builds the FSDP worker say
nothing to them. Everything here is scoped to the calling thread for the length of the block, so the
user's own code (and other threads: the event loop printing progress) keeps every bar, print, log
record and warning it would have had. (verl's import warnings are dropped where verl's engines are
imported: `verl_cpu.engines.import_verl_engines`.)
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

# verl's `verl.workers.engine` warns once per optional engine that is not installed (all of them on CPU).
# Third-party loggers whose records below ERROR are dropped inside a quiet block. torch.fx warns once
# that `is_fx_tracing` changed meaning when verl's nested tensors ask it: nothing a user can act on.
QUIET_LOGGERS = ("torch.fx._symbolic_trace",)

_state = threading.local()
_install_lock = threading.Lock()
_installed = False


def _quiet_here() -> bool:
    return getattr(_state, "depth", 0) > 0


class _QuietThreadFilter(logging.Filter):
    """Drops records below ERROR that a thread inside a quiet block emits."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not _quiet_here()


class _ThreadMutedStream:
    """Stands in for sys.stdout: writes from a quiet thread vanish, everyone else's pass through."""

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self.users = 0
        """Quiet blocks (any thread) inside which this proxy is installed."""

    def write(self, text: str) -> int:
        return len(text) if _quiet_here() else self.target.write(text)

    def flush(self) -> None:
        self.target.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


def _install_tqdm_hook() -> None:
    """Chain a hook in front of transformers' tqdm factory: a quiet thread gets its empty shim."""
    from transformers.utils import logging as hf_logging

    previous: Callable[..., Any] | None = None

    def hook(factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _quiet_here():
            factory = hf_logging.EmptyTqdm
        return previous(factory, args, kwargs) if previous is not None else factory(*args, **kwargs)

    previous = hf_logging.set_tqdm_hook(hook)


def _install() -> None:
    global _installed
    with _install_lock:
        if _installed:
            return
        _install_tqdm_hook()
        quiet_filter = _QuietThreadFilter()
        for name in QUIET_LOGGERS:
            logging.getLogger(name).addFilter(quiet_filter)
        _installed = True


@contextmanager
def _muted_stdout() -> Iterator[None]:
    """sys.stdout drops this thread's writes inside the block (verl reports its worker setup by print)."""
    with _install_lock:
        proxy = sys.stdout if isinstance(sys.stdout, _ThreadMutedStream) else None
        if proxy is None:
            proxy = _ThreadMutedStream(sys.stdout)
            sys.stdout = proxy  # type: ignore[assignment]
        proxy.users += 1
    try:
        yield
    finally:
        with _install_lock:
            proxy.users -= 1
            # Someone (rich's Live, pytest's capture) may have swapped stdout since: leave theirs alone.
            if proxy.users == 0 and sys.stdout is proxy:
                sys.stdout = proxy.target


@contextmanager
def quiet_third_party() -> Iterator[None]:
    """In this thread, until the block ends: no transformers progress bars, no stdout prints and no
    records below ERROR from `QUIET_LOGGERS`. Re-entrant."""
    _install()
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        with _muted_stdout():
            yield
    finally:
        _state.depth -= 1
