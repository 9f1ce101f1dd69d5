"""Engine creation for SqlStore: URL normalisation, SQLite pragmas and immediate write transactions."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa

from lightningstore.errors import InvalidInputError
from lightningstore.json_writer import write_json

WRITE_OPTION = "lightningstore_write"


def _dumps(value: Any) -> str:
    return write_json(value, "json").decode()


def _loads(value: Any) -> Any:
    # SQLite's NUMERIC affinity hands a bare JSON number back as a number, not text.
    if isinstance(value, int | float):
        return value
    return orjson.loads(value)


def normalize_url(url: str | Path | None) -> str:
    """Turn a path or URL into the URL SQLAlchemy needs (pysqlite / psycopg 3)."""
    if url is None:
        url = "lightningrl.db"
    text = str(url)
    if "://" not in text:
        return f"sqlite:///{Path(text).expanduser().resolve()}"
    scheme, rest = text.split("://", 1)
    if scheme in ("sqlite", "sqlite+pysqlite", "sqlite+aiosqlite"):
        return f"sqlite://{rest}"
    if scheme in ("postgres", "postgresql", "postgresql+psycopg", "postgresql+psycopg2"):
        return f"postgresql+psycopg://{rest}"
    raise InvalidInputError(
        "url", f"unsupported database URL scheme {scheme!r} (use sqlite:// or postgresql://)"
    )


def is_sqlite(url: str) -> bool:
    return normalize_url(url).startswith("sqlite")


def create_engine(url: str | Path | None, **kwargs: Any) -> sa.Engine:
    """Create the engine; on SQLite: WAL, NORMAL sync, busy timeout, and `BEGIN IMMEDIATE` for
    transactions opened with the write execution option (so claims are atomic across processes)."""
    full = normalize_url(url)
    options: dict[str, Any] = {"json_serializer": _dumps, "json_deserializer": _loads}
    if full.startswith("sqlite"):
        # Connections hop between the store's worker threads, never used by two at once.
        options["connect_args"] = {"timeout": 60, "check_same_thread": False}
    else:
        options.update(pool_size=kwargs.pop("pool_size", 20), max_overflow=kwargs.pop("max_overflow", 20))
        options["pool_pre_ping"] = True
    options.update(kwargs)
    engine = sa.create_engine(full, **options)
    if full.startswith("sqlite"):
        _install_sqlite_hooks(engine)
    return engine


def _install_sqlite_hooks(engine: sa.Engine) -> None:
    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the driver so BEGIN is ours to emit.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=60000")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        statement = "BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE_OPTION, False) else "BEGIN"
        # Straight to the driver: exec_driver_sql's machinery would run on every transaction.
        try:
            conn.connection.dbapi_connection.execute(statement)  # type: ignore[union-attr]
        except sqlite3.Error as exc:
            raise sa.exc.DBAPIError.instance(statement, (), exc, sqlite3.Error) from exc
