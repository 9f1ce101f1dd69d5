"""SqlPart: what every part of SqlStore shares (the database, the state machines, the span writer)."""

from __future__ import annotations

from lightningstore.sql.database import SqlDatabase
from lightningstore.sql.lifecycle import SqlLifecycle
from lightningstore.sql.span_writer import SpanWriter
from lightningstore.store import LightningStore


class SqlPart(LightningStore):
    """One noun's methods of the contract; SqlStore is all the parts together and sets the helpers.

    A part calls another part's method through the contract (`self.query_rollouts`), and reaches
    the database and the transaction helpers only through the three attributes below.
    """

    _db: SqlDatabase
    """Engine, threads and transactions; shared with the gate's records."""
    _life: SqlLifecycle
    """The rollout and attempt state machines, inside a transaction."""
    _span_writer: SpanWriter
    """Span and reward inserts, inside a transaction."""
    sweep_interval = 1.0
    """Seconds between the sweeps that claims and waits run on their way (`maybe_sweep`)."""
    _last_sweep = 0.0

    async def maybe_sweep(self) -> None:
        """Sweep when the last sweep is `sweep_interval` seconds old."""
        now = self._db.now()
        if now - self._last_sweep >= self.sweep_interval:
            self._last_sweep = now
            await self.sweep_stale_attempts(now)
