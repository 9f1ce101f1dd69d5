"""Connection handling shared by the SqlStore parts: engine, read and write transactions."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from lightningstore.errors import ConflictError, StoreError
from lightningstore.sql_engine import WRITE_OPTION, create_engine


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


class SqlBase:
    """Owns the engine; hands out read and (serialised on SQLite) write transactions."""

    def __init__(self, url: str | Path | None = None, *, engine: AsyncEngine | None = None) -> None:
        self._engine = engine if engine is not None else create_engine(url)
        self._is_sqlite = self._engine.dialect.name == "sqlite"
        # SQLite has one writer: queue in-process writers here instead of spinning on busy_timeout.
        self._write_lock = asyncio.Lock() if self._is_sqlite else None
        self._schema_ready = False
        self._schema_lock = asyncio.Lock()

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    def now(self) -> float:
        return time.time()

    async def ensure_schema(self) -> None:
        """Bring the database to the newest migration once per store object."""
        if self._schema_ready:
            return
        async with self._schema_lock:
            if self._schema_ready:
                return
            from lightningstore.migrate import upgrade_async

            await upgrade_async(self._engine)
            self._schema_ready = True

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[AsyncConnection]:
        await self.ensure_schema()
        async with self._engine.connect() as conn:
            async with conn.begin():
                yield conn

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        await self.ensure_schema()
        if self._write_lock is not None:
            async with self._write_lock:
                async with self._write_conn() as conn:
                    yield conn
        else:
            async with self._write_conn() as conn:
                yield conn

    @asynccontextmanager
    async def _write_conn(self) -> AsyncIterator[AsyncConnection]:
        try:
            async with self._engine.connect() as conn:
                conn = await conn.execution_options(**{WRITE_OPTION: True})
                async with conn.begin():
                    yield conn
        except IntegrityError as exc:
            raise ConflictError(f"write rejected by a database constraint: {exc.orig}") from exc
        except DBAPIError as exc:
            if isinstance(exc.__cause__, StoreError):
                raise exc.__cause__ from None
            raise

    async def close(self) -> None:
        await self._engine.dispose()
