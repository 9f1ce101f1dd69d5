"""Store backends the contract suite runs against: SQLite file, PostgreSQL, (HTTP client)."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg

from lightningstore import LightningStore, SqlStore

REPO = Path(__file__).resolve().parents[1]


def start_throwaway_postgres() -> tuple[str, str]:
    """Start a throwaway cluster with scripts/pg-throwaway; returns (url, data dir)."""
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / "pg-throwaway"), "start"], check=True, capture_output=True, text=True
    ).stdout
    env = dict(line.removeprefix("export ").split("=", 1) for line in out.strip().splitlines())
    return env["LIGHTNINGRL_TEST_PG_URL"], env["LIGHTNINGRL_PG_DIR"]


def stop_throwaway_postgres(data_dir: str) -> None:
    subprocess.run(["bash", str(REPO / "scripts" / "pg-throwaway"), "stop", data_dir], check=False)


def create_pg_database(server_url: str) -> str:
    """Create a fresh database on the server; returns its URL."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + f"/{name}"


def drop_pg_database(server_url: str, db_url: str) -> None:
    name = db_url.rsplit("/", 1)[1]
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@asynccontextmanager
async def sqlite_backend(tmp_path: Path, pg_server: Callable[[], str]) -> AsyncIterator[LightningStore]:
    store = SqlStore(tmp_path / "store.db")
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def postgres_backend(tmp_path: Path, pg_server: Callable[[], str]) -> AsyncIterator[LightningStore]:
    server = pg_server()
    url = create_pg_database(server)
    store = SqlStore(url)
    try:
        yield store
    finally:
        await store.close()
        drop_pg_database(server, url)


BACKENDS = {"sqlite": sqlite_backend, "postgres": postgres_backend}


def pg_url_from_env() -> str | None:
    return os.environ.get("LIGHTNINGRL_TEST_PG_URL")
