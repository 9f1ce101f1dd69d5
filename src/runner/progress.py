"""RunnerSummary counters and the live rich display of claimed / running / finished / failed."""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table

from lightningstore import AttemptStatus


@dataclass
class RunnerSummary:
    """What one `Runner.run()` did."""

    claimed: int = 0
    succeeded: int = 0
    failed: int = 0
    timed_out: int = 0
    ended_elsewhere: int = 0
    """Attempts the watchdog or a cancel ended while they ran."""
    running: int = 0

    @property
    def finished(self) -> int:
        return self.succeeded + self.failed + self.timed_out + self.ended_elsewhere

    def record(self, status: AttemptStatus | None) -> None:
        """Count one ended attempt."""
        self.running -= 1
        if status == AttemptStatus.SUCCEEDED:
            self.succeeded += 1
        elif status == AttemptStatus.TIMEOUT:
            self.timed_out += 1
        elif status is None:
            self.ended_elsewhere += 1
        else:
            self.failed += 1


class ProgressDisplay:
    """A live table of the summary's counters on stderr (a no-op when disabled)."""

    def __init__(self, summary: RunnerSummary, *, enabled: bool, title: str = "lightningrl runner") -> None:
        self.summary = summary
        self.title = title
        self._live = (
            Live(
                get_renderable=self.render,
                console=Console(stderr=True),
                refresh_per_second=4,
                transient=False,
            )
            if enabled
            else None
        )

    def render(self) -> Table:
        table = Table(title=self.title, show_edge=False)
        for column in ("claimed", "running", "finished", "succeeded", "failed", "timed out"):
            table.add_column(column, justify="right")
        s = self.summary
        table.add_row(
            *(
                str(v)
                for v in (
                    s.claimed,
                    s.running,
                    s.finished,
                    s.succeeded,
                    s.failed + s.ended_elsewhere,
                    s.timed_out,
                )
            )
        )
        return table

    def __enter__(self) -> ProgressDisplay:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.__exit__(kind, error, tb)
