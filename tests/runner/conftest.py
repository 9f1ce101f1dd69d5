from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from live_model import inference_url, tiny_model
from live_model import serve_in_thread as _serve_in_thread

from lightningstore import SqlStore

__all__ = ["inference_url", "tiny_model", "_serve_in_thread"]


@pytest.fixture
async def sql_store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    """A fresh SQLite-file store."""
    store = SqlStore(tmp_path / "store.db")
    try:
        yield store
    finally:
        await store.close()


@dataclass(frozen=True)
class StoreServer:
    """The store server (REST + OTLP + LLM proxy) over the test's SQLite file, in a background thread."""

    url: str
    db: Path

    @property
    def proxy_url(self) -> str:
        return f"{self.url}/proxy"


@pytest.fixture
def store_server(tmp_path: Path) -> Iterator[StoreServer]:
    """A live store server with the proxy, sharing `sql_store`'s database file."""
    from lightningstore.server import build_app

    db = tmp_path / "store.db"
    app = build_app(SqlStore(db), sweep_interval=None, close_store=True)
    url, server, thread = _serve_in_thread(app, "runner-test-store")
    yield StoreServer(url=url, db=db)
    server.should_exit = True  # type: ignore[attr-defined]
    thread.join(timeout=10)  # type: ignore[attr-defined]
