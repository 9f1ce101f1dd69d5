"""Connection handling shared by the SqlStore parts: engine, threads, read and write transactions.

The public API is async; each call runs as ONE synchronous transaction on a worker thread.
Measured here: an aiosqlite statement through SQLAlchemy's async engine costs ~300 us, a
synchronous one ~13 us and a thread hop ~65 us, so a whole transaction per hop is ~10x faster.
SQLite gets a single writer thread (its one-writer rule, without spinning on busy locks).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, IntegrityError

from lightningstore.errors import ConflictError
from lightningstore.sql_engine import WRITE_OPTION, create_engine

T = TypeVar("T")


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


class SqlBase:
    """Owns the engine and the worker threads; runs read and write transactions."""

    def __init__(
        self, url: str | Path | None = None, *, engine: sa.Engine | None = None, threads: int = 8
    ) -> None:
        self._engine = engine if engine is not None else create_engine(url)
        self._is_sqlite = self._engine.dialect.name == "sqlite"
        self._readers = ThreadPoolExecutor(threads, thread_name_prefix="lightningstore-read")
        self._writers = (
            ThreadPoolExecutor(1, thread_name_prefix="lightningstore-write")
            if self._is_sqlite
            else self._readers
        )
        self._schema_ready = False
        self._schema_lock = threading.Lock()
        self._local = threading.local()
        self._connections: list[sa.Connection] = []
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    @property
    def engine(self) -> sa.Engine:
        return self._engine

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    def now(self) -> float:
        return time.time()

    def _ensure_schema(self) -> None:
        """Bring the database to the newest migration once per store object."""
        if self._schema_ready:
            return
        with self._schema_lock:
            if not self._schema_ready:
                from lightningstore.migrate import upgrade_engine

                upgrade_engine(self._engine)
                self._schema_ready = True

    async def ensure_schema(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._writers, self._ensure_schema)

    def _thread_connection(self, write: bool) -> sa.Connection:
        """Each worker thread keeps its own connection (no pool checkout/reset per call)."""
        key = "write" if write else "read"
        conn = getattr(self._local, key, None)
        if conn is None or conn.closed or conn.invalidated:
            conn = self._engine.connect()
            if write:
                conn = conn.execution_options(**{WRITE_OPTION: True})
            setattr(self._local, key, conn)
            self._connections.append(conn)
        return conn

    def _run_tx(self, fn: Callable[[sa.Connection], T], write: bool) -> T:
        self._ensure_schema()
        conn = self._thread_connection(write)
        try:
            with conn.begin():
                return fn(conn)
        except IntegrityError as exc:
            raise ConflictError(f"write rejected by a database constraint: {exc.orig}") from exc
        except DBAPIError as exc:
            if exc.connection_invalidated:
                setattr(self._local, "write" if write else "read", None)
            raise

    def _read_tx(self, fn: Callable[[sa.Connection], T]) -> T:
        return self._run_tx(fn, write=False)

    def _write_tx(self, fn: Callable[[sa.Connection], T]) -> T:
        return self._run_tx(fn, write=True)

    async def _read(self, fn: Callable[[sa.Connection], T]) -> T:
        """Run `fn(conn)` in one read transaction on a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self._readers, self._read_tx, fn)

    async def _write(self, fn: Callable[[sa.Connection], T]) -> T:
        """Run `fn(conn)` in one write transaction (all or nothing) on the writer thread."""
        return await asyncio.get_running_loop().run_in_executor(self._writers, self._write_tx, fn)

    def _notify(self) -> None:
        """Wake every waiter of wait_for_rollouts in this process (called from worker threads)."""
        for loop, event in list(self._waiters):
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:
                self._waiters.discard((loop, event))

    async def close(self) -> None:
        self._readers.shutdown(wait=True)
        if self._writers is not self._readers:
            self._writers.shutdown(wait=True)
        for conn in self._connections:
            conn.close()
        self._engine.dispose()
