"""`--workers N`: one store server as several processes on one PostgreSQL database."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
from backends import LiveServer, create_pg_database, drop_pg_database

from lightningstore import RolloutRequest
from lightningstore.client.store_client import StoreClient


def test_two_processes_claim_every_rollout_exactly_once(pg_server, tmp_path: Path) -> None:
    db = create_pg_database(pg_server())
    server = LiveServer(db, tmp_path / "server.log", extra_args=("--workers", "2")).start()
    try:
        assert server.proc is not None
        children = psutil.Process(server.proc.pid).children()
        workers = [c for c in children if "spawn_main" in " ".join(c.cmdline())]  # not the resource tracker
        assert len(workers) == 2, [c.cmdline() for c in children]

        async def run() -> tuple[list[str], list[str]]:
            async with StoreClient(server.url) as algorithm:
                enqueued = [
                    r.rollout_id
                    for r in await algorithm.enqueue_many_rollouts(
                        [RolloutRequest(input={"i": i}) for i in range(300)]
                    )
                ]
            claimed: list[str] = []

            async def runner(client: StoreClient) -> None:
                while True:
                    got = await client.dequeue_many_rollouts(3, worker_id=None)
                    if not got:
                        return
                    claimed.extend(r.rollout_id for r in got)

            # Two clients, 24 claimers: connections land on both processes, claims race in PostgreSQL.
            async with StoreClient(server.url) as one, StoreClient(server.url) as two:
                await asyncio.gather(*(runner(one if k % 2 else two) for k in range(24)))
            return enqueued, claimed

        enqueued, claimed = asyncio.run(run())
        assert len(claimed) == len(set(claimed)) == 300
        assert set(claimed) == set(enqueued)
        # Each process has its own gateway, so pausing one is refused rather than silently partial.
        answer = httpx.post(f"{server.url}/proxy/admin/pause", timeout=10)
        assert answer.status_code == 409 and "2 processes" in answer.json()["error"]["message"]
    finally:
        server.stop()
        drop_pg_database(pg_server(), db)


def test_several_processes_on_sqlite_are_refused(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "lightningstore.server", "--db", str(tmp_path / "s.db"), "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "needs a PostgreSQL database" in result.stderr
