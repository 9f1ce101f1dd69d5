"""Engine creation for SqlStore: URL normalisation, SQLite pragmas and immediate write transactions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from lightningstore.errors import InvalidInputError

WRITE_OPTION = "lightningstore_write"


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY).decode()


def _loads(value: Any) -> Any:
    # SQLite's NUMERIC affinity hands a bare JSON number back as a number, not text.
    if isinstance(value, int | float):
        return value
    return orjson.loads(value)


def normalize_url(url: str | Path | None) -> str:
    """Turn a path or a sync URL into the async URL SQLAlchemy needs (aiosqlite / psycopg)."""
    if url is None:
        url = "lightningrl.db"
    text = str(url)
    if "://" not in text:
        return f"sqlite+aiosqlite:///{Path(text).expanduser().resolve()}"
    scheme, rest = text.split("://", 1)
    if scheme in ("sqlite", "sqlite+pysqlite"):
        return f"sqlite+aiosqlite://{rest}"
    if scheme in ("postgres", "postgresql", "postgresql+psycopg2"):
        return f"postgresql+psycopg://{rest}"
    if scheme in ("sqlite+aiosqlite", "postgresql+psycopg", "postgresql+asyncpg"):
        return text
    raise InvalidInputError(
        "url", f"unsupported database URL scheme {scheme!r} (use sqlite:// or postgresql://)"
    )


def sync_url(url: str) -> str:
    """The synchronous twin of an async URL (used by Alembic's CLI paths)."""
    return url.replace("sqlite+aiosqlite://", "sqlite://").replace(
        "postgresql+psycopg://", "postgresql+psycopg://"
    )


def create_engine(url: str | Path | None, **kwargs: Any) -> AsyncEngine:
    """Create the async engine; on SQLite: WAL, NORMAL sync, busy timeout, and `BEGIN IMMEDIATE`
    for transactions opened with the write execution option (so claims are atomic)."""
    full = normalize_url(url)
    is_sqlite = full.startswith("sqlite")
    options: dict[str, Any] = {"json_serializer": _dumps, "json_deserializer": _loads}
    if is_sqlite:
        options["connect_args"] = {"timeout": 60}
    else:
        options.update(pool_size=kwargs.pop("pool_size", 20), max_overflow=kwargs.pop("max_overflow", 20))
        options["pool_pre_ping"] = True
    options.update(kwargs)
    engine = create_async_engine(full, **options)
    if is_sqlite:
        _install_sqlite_hooks(engine)
    return engine


def _install_sqlite_hooks(engine: AsyncEngine) -> None:
    @sa.event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the driver so BEGIN is ours to emit.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=60000")
        cursor.close()

    @sa.event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        immediate = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
