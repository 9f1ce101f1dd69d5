"""Store backends the contract suite runs against: SQLite file, PostgreSQL, HTTP client."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg

from lightningstore import LightningStore, SqlStore
from lightningstore.server.run import free_port

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


class LiveServer:
    """A real `python -m lightningstore.server` process on 127.0.0.1 over one database."""

    def __init__(
        self,
        db: str | Path,
        log_path: Path,
        *,
        port: int | None = None,
        extra_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.db = str(db)
        self.port = port or free_port()
        self.log_path = log_path
        self.extra_args = extra_args
        # Start from a dev-mode environment: role tokens set in the caller's shell must not leak in.
        secret = [k for k in os.environ if k.startswith("LIGHTNINGRL_") and k.endswith(("_TOKEN", "_SECRET"))]
        self.env = {**{k: v for k, v in os.environ.items() if k not in secret}, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> LiveServer:
        """Start the process and return once /healthz answers (bounded by `timeout`)."""
        import httpx

        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lightningstore.server",
                "--db",
                self.db,
                "--port",
                str(self.port),
                *self.extra_args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"store server exited with {self.proc.returncode}: {self.log_path.read_text()}"
                )
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"store server did not become ready in {timeout}s: {self.log_path.read_text()}")

    def kill(self) -> None:
        """SIGKILL the process (no shutdown hooks run) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@asynccontextmanager
async def http_backend(tmp_path: Path, pg_server: Callable[[], str]) -> AsyncIterator[LightningStore]:
    """A StoreClient talking to a real server process over a SQLite file."""
    from lightningstore.client.store_client import StoreClient

    server = LiveServer(tmp_path / "store.db", tmp_path / "server.log").start()
    client = StoreClient(server.url)
    try:
        yield client
    finally:
        await client.close()
        server.stop()


BACKENDS["http"] = http_backend
