"""StepProgress: a live bar on a terminal, plain lines when the console is a file, a pipe or a CI log.

rich's bar on a non-terminal console prints nothing until it stops and then one final frame, so a
user tailing a log sees no progress at all; there, every `every`-th step (and the last) prints
one line instead: `step 12/60  reward 0.83  held-out 0.91  4.2 s`.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class StepProgress:
    """Progress over `total` steps; `advance(info)` after each one. A no-op when not `enabled`."""

    def __init__(
        self,
        console: Console,
        total: int,
        *,
        bar_label: str,
        line_label: str = "step",
        every: int = 1,
        enabled: bool = True,
        transient: bool = False,
    ) -> None:
        if total < 0:
            raise ValueError(f"total must be >= 0, got {total}")
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.console = console
        self.total = total
        self.line_label = line_label
        self.every = every
        self.enabled = enabled
        self.done = 0
        self.live = enabled and (console.is_terminal or console.is_jupyter)
        self._bar: Progress | None = None
        if self.live:
            self._bar = Progress(
                TextColumn(f"[bold]{bar_label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[info]}"),
                console=console,
                transient=transient,
            )
            self._task = self._bar.add_task(bar_label, total=total, info="")

    def __enter__(self) -> StepProgress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def advance(self, info: str) -> None:
        """One more step done; `info` is what to show beside the count (already formatted)."""
        self.done += 1
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, advance=1, info=info)
        elif self.done % self.every == 0 or self.done == self.total:
            self.console.print(
                f"{self.line_label} {self.done}/{self.total}  {info}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )


def step_info(reward: float, seconds: float, heldout: float | None = None) -> str:
    """`reward 0.83  held-out 0.91  4.2 s` (held-out only when it was measured this step)."""
    parts = [f"reward {reward:.2f}"]
    if heldout is not None:
        parts.append(f"held-out {heldout:.2f}")
    parts.append(f"{seconds:.1f} s")
    return "  ".join(parts)
