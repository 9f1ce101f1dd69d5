"""WalCheckpointer: SQLite WAL checkpoints on their own thread, off the writer's commit path.

By default the connection whose commit pushes the WAL past 1000 pages copies the WAL back into
the database file (and fsyncs both) inside that commit, which stalls every call of that commit
and raises the average write call's cost. This thread runs PASSIVE checkpoints on its
own connection instead (they never block the writer or readers), at most once per `interval`,
so a page changed by many commits (a queue index, an attempt row) is copied once. The writer
keeps an automatic checkpoint at a higher mark as a safety net.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable

import sqlalchemy as sa

WRITER_AUTOCHECKPOINT_PAGES = 20_000
"""The writer connection's own checkpoint mark (~80 MB of WAL), reached only if this thread
cannot keep up (for example while a long read pins old pages)."""


class WalCheckpointer:
    """`nudge()` after commits; a checkpoint follows within `interval` seconds."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], *, interval: float = 0.05) -> None:
        self._connect = connect
        self._interval = interval
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def nudge(self) -> None:
        if self._thread is None:
            self._start()
        self._wake.set()

    def close(self) -> None:
        with self._lock:
            self._closing.set()
            thread, self._thread = self._thread, None
        if thread is not None:
            self._wake.set()
            thread.join()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._closing.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="lightningstore-checkpoint", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        connection: sqlite3.Connection | None = None
        try:
            while True:
                self._wake.wait()
                if self._closing.is_set():
                    return
                self._wake.clear()
                try:
                    if connection is None:
                        connection = self._connect()
                    connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:  # retried on the next nudge; the writer's own mark remains
                    _discard(connection)
                    connection = None
                self._closing.wait(self._interval)
        finally:
            _discard(connection)


def _discard(connection: sqlite3.Connection | None) -> None:
    if connection is not None:
        try:
            connection.close()
        except sqlite3.Error:  # closing a broken connection may fail too
            pass


def checkpointer_for(engine: sa.Engine) -> WalCheckpointer | None:
    """A checkpointer for a SQLite database file (None for in-memory databases), on a plain
    driver connection made like the engine's own: it takes no slot of the engine's pool."""
    database = engine.url.database or ""
    if engine.dialect.driver != "pysqlite" or database in ("", ":memory:") or "mode=memory" in database:
        return None
    cargs, cparams = engine.dialect.create_connect_args(engine.url)

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(*cargs, **{**cparams, "isolation_level": None, "check_same_thread": False})

    return WalCheckpointer(connect)
