"""SqlStore: the LightningStore on SQLAlchemy 2 (SQLite file by default, PostgreSQL by URL).

The parts, one noun each: sql_base (engine, threads, transactions), sql_group_commit (SQLite's
writer), sql_checkpoint (SQLite's WAL checkpoints), sql_statements and sql_prepared (the hot
statements, built and compiled once), sql_lifecycle (the state machines inside a transaction),
sql_rollouts, sql_attempts, sql_spans, sql_queries, sql_workers, sql_resources and sql_rows.
"""

from __future__ import annotations

from lightningstore.sql_resources import SqlResources
from lightningstore.sql_rollouts import SqlRollouts
from lightningstore.sql_spans import SqlSpans
from lightningstore.sql_workers import SqlWorkers
from lightningstore.store import LightningStore


class SqlStore(SqlRollouts, SqlSpans, SqlWorkers, SqlResources, LightningStore):
    """LightningStore on a SQL database. `SqlStore("runs/store.db")` or `SqlStore("postgresql://...")`.

    The schema is brought to the newest migration on first use.
    """
