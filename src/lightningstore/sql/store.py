"""SqlStore: the LightningStore on SQLAlchemy 2 (SQLite file by default, PostgreSQL by URL).

SqlStore is its parts, one noun each, each a subclass of SqlPart that writes that noun's methods of
the contract once: rollouts, attempts, spans (and rewards), queries, resources and workers. No
method is written twice. The parts share state only through three composed helpers that SqlStore
makes and SqlPart declares: one SqlDatabase (engine, worker threads, transactions, SQLite's
group-commit writer; the gate's records, lightningstore.gate.sql_records, write through the very
same one), one SqlLifecycle (the state machines inside a transaction) and one SpanWriter (span and
reward inserts inside a transaction). So every part names what it uses (`self._db.write`,
`self._life.finish_attempt`), and reaches another part only through the contract
(`self.query_rollouts`).

The other modules, one noun each: group_commit (SQLite's writer), checkpoint (SQLite's WAL
checkpoints), engine (URLs, pragmas), statements and prepared (the hot statements, built and
compiled once), rows (row -> model), tables (the metadata) and migrate (Alembic from code).
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from lightningstore.sql.attempts import SqlAttempts
from lightningstore.sql.database import SqlDatabase
from lightningstore.sql.lifecycle import SqlLifecycle
from lightningstore.sql.queries import SqlQueries
from lightningstore.sql.resources import SqlResources
from lightningstore.sql.rollouts import SqlRollouts
from lightningstore.sql.span_writer import SpanWriter
from lightningstore.sql.spans import SqlSpans
from lightningstore.sql.workers import SqlWorkers


class SqlStore(SqlRollouts, SqlAttempts, SqlSpans, SqlQueries, SqlResources, SqlWorkers):
    """LightningStore on a SQL database. `SqlStore("runs/store.db")` or `SqlStore("postgresql://...")`.

    The schema is brought to the newest migration on first use.
    """

    def __init__(
        self, url: str | Path | None = None, *, engine: sa.Engine | None = None, threads: int = 8
    ) -> None:
        self._db = SqlDatabase(url, engine=engine, threads=threads)
        self._life = SqlLifecycle(self._db)
        self._span_writer = SpanWriter(self._db, self._life)

    @property
    def database(self) -> SqlDatabase:
        """The store's SqlDatabase, for records kept beside it (`SqlGateRecords(store.database)`)."""
        return self._db

    @property
    def engine(self) -> sa.Engine:
        return self._db.engine

    @property
    def dialect(self) -> str:
        return self._db.dialect

    async def ensure_schema(self) -> None:
        """Bring the database to the newest migration now instead of on first use."""
        await self._db.ensure_schema()

    async def close(self) -> None:
        await self._db.close()
