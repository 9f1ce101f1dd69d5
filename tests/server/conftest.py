from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from backends import LiveServer

from lightningstore import SqlStore
from lightningstore.auth import TokenConfig
from lightningstore.client.store_client import StoreClient
from lightningstore.server import build_app

TOKENS = {
    "admin": "adm-token",
    "algorithm": "alg-token",
    "runner": ["run-token", "run-token-2"],
    "approver": "apr-token",
    "agent_secret": "agent-secret",
}


@pytest.fixture
def tokens() -> dict[str, object]:
    """The role tokens and agent secret `make_client`'s app is configured with."""
    return TOKENS


@pytest.fixture
async def sql_store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    store = SqlStore(tmp_path / "store.db")
    yield store
    await store.close()


@pytest.fixture
def secured_transport(sql_store: SqlStore) -> httpx.ASGITransport:
    """An in-process transport to an app with TOKENS configured."""
    app = build_app(
        sql_store, tokens=TokenConfig.from_mapping(TOKENS), sweep_interval=None, max_body_bytes=4096
    )
    return httpx.ASGITransport(app=app)


@pytest.fixture
def make_client(secured_transport: httpx.ASGITransport) -> Iterator[Callable[..., StoreClient]]:
    """StoreClients (one per token) talking in-process to the secured app."""

    def make(token: str | None = None) -> StoreClient:
        return StoreClient("http://127.0.0.1", token, transport=secured_transport, max_retries=0)

    yield make


@pytest.fixture
def raw_http(sql_store: SqlStore) -> httpx.AsyncClient:
    """A plain httpx client on a dev-mode app (no tokens) with a 4 KiB body limit."""
    app = build_app(sql_store, sweep_interval=None, max_body_bytes=4096)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A real server process (dev mode) over a SQLite file in tmp_path."""
    server = LiveServer(tmp_path / "store.db", tmp_path / "server.log").start()
    yield server
    server.stop()
