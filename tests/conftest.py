from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
from backends import (
    BACKENDS,
    create_pg_database,
    drop_pg_database,
    pg_url_from_env,
    start_throwaway_postgres,
    stop_throwaway_postgres,
)

from lightningstore import LightningStore

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """A callable giving the PostgreSQL server URL; starts a throwaway cluster on first use."""
    state: dict[str, str] = {}

    def get() -> str:
        if "url" not in state:
            url = pg_url_from_env()
            if url is None:
                url, state["dir"] = start_throwaway_postgres()
            state["url"] = url
        return state["url"]

    yield get
    if "dir" in state:
        stop_throwaway_postgres(state["dir"])


@pytest.fixture(params=sorted(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path, pg_server) -> AsyncIterator[LightningStore]:
    """The store under contract: one per backend (SQLite, PostgreSQL, HTTP client)."""
    async with BACKENDS[request.param](tmp_path, pg_server) as s:
        yield s


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path, pg_server) -> Iterator[str]:
    """The URL of an empty SQL database: a SQLite file, or a fresh database on the PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    server = pg_server()
    url = create_pg_database(server)
    yield url
    drop_pg_database(server, url)
