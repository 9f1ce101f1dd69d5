"""How `fit` stops on Ctrl-C or SIGTERM: one line saying the step reached and how to resume."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lightningrl.rl.metrics import MetricsLog


class FitInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) stopped `fit`; every process it started is stopped. The message says the
    step reached and how to resume."""


def interrupted_text(out: Path) -> str:
    """Where the run stopped (the last step metrics.csv holds) and how to continue it."""
    step = max(
        (int(r["step"]) for r in MetricsLog.resume(out / "metrics.csv").rows if "step" in r), default=0
    )
    return (
        f"interrupted after step {step}; every process fit started is stopped. To resume, run the same "
        f"command again with the same output_dir ({out})."
    )


def show_interrupts_briefly() -> None:
    """An uncaught `FitInterrupted` prints its one line, not a traceback (other errors: unchanged)."""
    previous = sys.excepthook
    if getattr(previous, "lightningrl_brief", False):
        return

    def hook(kind: type[BaseException], error: BaseException, tb: Any) -> None:
        if isinstance(error, FitInterrupted):
            print(error, file=sys.stderr)
        else:
            previous(kind, error, tb)

    hook.lightningrl_brief = True  # type: ignore[attr-defined]
    sys.excepthook = hook


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C while fit runs (asyncio turns SIGINT into a clean cancel)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
