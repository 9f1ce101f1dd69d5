"""SqlDatabase: the engine, its worker threads, and the read and write transactions on them.

SqlStore's parts and the gate's SqlGateRecords run every transaction through one SqlDatabase, so
on SQLite all their writes share one group-committing writer.

The public API is async; each call runs as ONE synchronous transaction: a statement through
SQLAlchemy's async engine (aiosqlite) costs many times a synchronous one, and a thread hop costs
more than a short statement, so one hop per whole transaction is far cheaper than one per
statement. Reads run on worker threads. Writes are committed together (group_commit): SQLite's
(its one-writer rule, without spinning on busy locks) a loop turn's worth at a time on the event
loop's own thread, as a write is a few short statements and the hop to a writer thread and back
costs more than they do; PostgreSQL's on one writer thread, each group in one transaction without
savepoints (a group with a failing call is rolled back and its calls run one transaction each), as
the writes that arrive while one group commits form the next. A thread checkpoints the WAL
(checkpoint).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, IntegrityError, StatementError

from lightningstore.errors import ConflictError, InvalidInputError, StoreError
from lightningstore.sql.checkpoint import WRITER_AUTOCHECKPOINT_PAGES, checkpointer_for
from lightningstore.sql.claim_signal import ClaimSignal
from lightningstore.sql.engine import WRITE_OPTION, create_engine
from lightningstore.sql.group_commit import Call, GroupCommitWriter

T = TypeVar("T")
_TOO_BIG = object()
HEAVY_ROWS = 256
"""A SQLite write call of more rows than this commits off the event loop, which keeps serving."""


def new_id(prefix: str) -> str:
    return f"{prefix}-{os.urandom(8).hex()}"  # as random as uuid4().hex[:16], a fifth of the cost


def parse_enum(kind: Callable[[Any], T], value: Any, field: str) -> T:
    """`kind(value)`, or InvalidInputError naming `field` and the value given."""
    try:
        return kind(value)
    except ValueError as exc:
        raise InvalidInputError(field, f"invalid value {value!r} ({exc})") from exc


class CommitOutcomeUnknownError(StoreError):
    """The connection to PostgreSQL broke during COMMIT: the write may or may not be stored.

    Answered as a 500, which the client re-sends only for writes that are safe to repeat (a 503
    would have a claim or a new resource set re-sent, and perhaps stored twice)."""

    http_status = 500
    code = "store_error"


def _commit_outcome_unknown(exc: DBAPIError) -> CommitOutcomeUnknownError:
    return CommitOutcomeUnknownError(
        f"the database connection broke during COMMIT ({type(exc.orig).__name__}): "
        "the write may or may not be stored; re-send it only if it is safe to repeat"
    )


class SqlDatabase:
    """Owns the engine and the worker threads; runs read and write transactions."""

    def __init__(
        self, url: str | Path | None = None, *, engine: sa.Engine | None = None, threads: int = 8
    ) -> None:
        self._engine = engine if engine is not None else create_engine(url)
        self._is_sqlite = self._engine.dialect.name == "sqlite"
        self._readers = ThreadPoolExecutor(threads, thread_name_prefix="lightningstore-read")
        self._group_writer = (
            GroupCommitWriter(self._run_group)
            if self._is_sqlite
            else GroupCommitWriter(self._run_group_optimistic, offload=True)
        )
        self._checkpointer = checkpointer_for(self._engine)
        self._schema_ready = False
        self._schema_lock = threading.Lock()
        self._local = threading.local()
        self._connections: list[sa.Connection] = []
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self.claim_signal = ClaimSignal()
        """Wakes waiting claims when this process's commits queue rollouts."""

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
                from lightningstore.sql.migrate import upgrade_engine

                upgrade_engine(self._engine)
                self._schema_ready = True

    async def ensure_schema(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._readers, self._ensure_schema)

    def _thread_connection(self, write: bool) -> sa.Connection:
        """Each worker thread keeps its own connection (no pool checkout/reset per call)."""
        key = "write" if write else "read"
        conn = getattr(self._local, key, None)
        if conn is None or conn.closed or conn.invalidated:
            conn = self._engine.connect()
            if write:
                conn = conn.execution_options(**{WRITE_OPTION: True})
                if self._checkpointer is not None:  # it checkpoints; the writer only past a high mark
                    driver = conn.connection.driver_connection
                    assert driver is not None
                    driver.execute(f"PRAGMA wal_autocheckpoint={WRITER_AUTOCHECKPOINT_PAGES}")
            setattr(self._local, key, conn)
            self._connections.append(conn)
        return conn

    def _translate(self, exc: Exception, write: bool) -> Exception:
        """The error a caller sees for a failed transaction; forgets a connection the driver lost."""
        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
            setattr(self._local, "write" if write else "read", None)
        if isinstance(exc, StatementError) and isinstance(exc.orig, InvalidInputError):
            return exc.orig  # a value refused while SQLAlchemy bound it (e.g. an oversized JSON integer)
        if isinstance(exc, IntegrityError):
            error = ConflictError(f"write rejected by a database constraint: {exc.orig}")
            error.__cause__ = exc
            return error
        return exc

    def _run_tx(self, fn: Callable[[sa.Connection], T], write: bool) -> T:
        self._ensure_schema()
        conn = self._thread_connection(write)
        committing = False
        try:
            with conn.begin():
                result = fn(conn)
                committing = True
            return result
        except Exception as exc:
            error = self._translate(exc, write)
            if committing and write and isinstance(exc, DBAPIError) and exc.connection_invalidated:
                error = _commit_outcome_unknown(exc)
            if error is exc:
                raise
            raise error from exc
        finally:
            self._flush_notify()

    def _run_group(self, calls: list[Call]) -> None:
        """Run queued write calls in one SQLite transaction, each in its own savepoint."""
        try:
            self._ensure_schema()
            conn = self._thread_connection(write=True)
            with conn.begin():
                if len(calls) == 1:  # its failure rolls back only its own work: no savepoint needed
                    calls[0].result = calls[0].fn(conn)
                else:
                    self._run_in_savepoints(conn, calls)
            if self._checkpointer is not None:
                self._checkpointer.nudge()
        except Exception as exc:
            error = self._translate(exc, write=True)
            for call in calls:
                if call.error is None:  # a call that failed on its own keeps its own error
                    call.error, call.result = error, None
        finally:
            self._flush_notify()

    def _run_group_optimistic(self, calls: list[Call]) -> None:
        """Run queued write calls in one PostgreSQL transaction without savepoints (each costs two
        round trips); if any call fails, roll the whole group back and run each call in a
        transaction of its own, so that a call's failure never touches another's work."""
        if len(calls) == 1:
            self._run_alone(calls[0])
            return
        failed = committing = False
        try:
            self._ensure_schema()
            conn = self._thread_connection(write=True)
            with conn.begin() as tx:
                for call in calls:
                    try:
                        call.result = call.fn(conn)
                    except Exception as exc:  # noqa: BLE001 - every call runs again on its own below
                        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
                            raise
                        failed = True
                        break
                if failed:
                    tx.rollback()
                committing = not failed
        except Exception as exc:
            error = self._translate(exc, write=True)
            if committing and isinstance(exc, DBAPIError) and exc.connection_invalidated:
                error = _commit_outcome_unknown(exc)
            for call in calls:
                call.error, call.result = error, None
            return
        finally:
            self._flush_notify()
        if failed:
            for call in calls:
                self._run_alone(call)

    def _run_alone(self, call: Call) -> None:
        try:
            call.result = self._write_tx(call.fn)
        except Exception as exc:  # noqa: BLE001 - the caller hears of it through its future
            call.error, call.result = exc, None

    def _run_in_savepoints(self, conn: sa.Connection, calls: list[Call]) -> None:
        # Issued on the driver connection: SQLAlchemy's nested transactions cost several times more, and
        # these never outlive the transaction SQLAlchemy opened around them.
        driver = conn.connection.driver_connection
        assert driver is not None
        for call in calls:
            driver.execute("SAVEPOINT lightningstore_call")
            try:
                call.result = call.fn(conn)
            except Exception as exc:
                driver.execute("ROLLBACK TO lightningstore_call")
                call.error = self._translate(exc, write=True)
            driver.execute("RELEASE lightningstore_call")

    def _read_tx(self, fn: Callable[[sa.Connection], T]) -> T:
        return self._run_tx(fn, write=False)

    def _write_tx(self, fn: Callable[[sa.Connection], T]) -> T:
        return self._run_tx(fn, write=True)

    async def read(
        self, fn: Callable[[sa.Connection], T], *, small: bool | Callable[[sa.Connection], bool] = False
    ) -> T:
        """Run `fn(conn)` in one read transaction on a worker thread. On SQLite, when the answer is
        small (`small=True`: one row by key; or `small(conn)`, asked first in the same transaction,
        says so), at once on the calling thread instead: WAL readers never wait for the writer, and
        the hop to a worker thread and back costs more than a small read (and, under load, waits
        for the GIL behind the loop)."""
        if self._is_sqlite and small is True:
            return self._read_tx(fn)
        if self._is_sqlite and callable(small):
            found = self._read_tx(lambda conn: fn(conn) if small(conn) else _TOO_BIG)
            if found is not _TOO_BIG:
                return found  # type: ignore[return-value]
        return await asyncio.get_running_loop().run_in_executor(self._readers, self._read_tx, fn)

    async def write(self, fn: Callable[[sa.Connection], T], *, rows: int = 1) -> T:
        """Run `fn(conn)` in one write transaction (all or nothing); returns after its commit. It joins
        a group (group_commit): on SQLite the one committed at the end of this event-loop turn, on the
        loop's thread, unless it writes more than HEAVY_ROWS `rows` (then on a helper thread); on
        PostgreSQL the next one the writer thread commits."""
        result: T = await self._group_writer.submit(fn, heavy=rows > HEAVY_ROWS)
        return result

    def notify(self) -> None:
        """Ask for the waiters of `changes()` to be woken once this transaction has ended."""
        self._local.notify = True

    def queued(self, n: int) -> None:
        """Say that this transaction makes `n` rollouts claimable: waiting claims wake once it has ended."""
        self._local.queued = getattr(self._local, "queued", 0) + n

    @contextmanager
    def changes(self) -> Iterator[asyncio.Event]:
        """An event set after each transaction that called `notify()` (in this process) ends."""
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        self._waiters.add(waiter)
        try:
            yield waiter[1]
        finally:
            self._waiters.discard(waiter)

    def _flush_notify(self) -> None:
        """Wake every waiter of `changes()`, and a waiting claim per rollout queued (called from worker threads)."""
        if queued := getattr(self._local, "queued", 0):
            self._local.queued = 0
            self.claim_signal.release(queued)
        if not getattr(self._local, "notify", False):
            return
        self._local.notify = False
        for loop, event in list(self._waiters):
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:
                self._waiters.discard((loop, event))

    def _stop_threads(self) -> None:
        """Let queued writes commit, then stop the writer and the checkpointer."""
        self._group_writer.close()
        if self._checkpointer is not None:
            self._checkpointer.close()

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._stop_threads)
        self._readers.shutdown(wait=True)
        for conn in self._connections:
            conn.close()
        self._engine.dispose()
