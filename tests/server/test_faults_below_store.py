"""Faults below the store: PostgreSQL restarted mid-run, and the SQLite file's disk full.

Both run a real server process on 127.0.0.1: the first on its own throwaway PostgreSQL cluster
(restarted with pg_ctl while a client keeps writing), the second on a SQLite file in a small tmpfs
the test mounts and fills (skipped where mounting is not allowed).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import orjson
import psycopg
import pytest
import sqlalchemy as sa
from backends import (
    LiveServer,
    create_pg_database,
    drop_pg_database,
    start_throwaway_postgres,
    stop_throwaway_postgres,
)
from starlette.requests import Request

from lightningstore.client.store_client import StoreClient
from lightningstore.data.reward import RewardIn
from lightningstore.data.rollout import RolloutRequest
from lightningstore.data.span import SpanIn
from lightningstore.server.error_handlers import answer_error
from lightningstore.sql.database import CommitOutcomeUnknownError, SqlDatabase

ROUNDS = 60


def _pg_ctl(data_dir: str, *args: str) -> None:
    pgbin = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))[-1]
    # `-l`: the restarted postmaster must not hold this process's pipes open.
    command = [str(pgbin / "pg_ctl"), "-D", f"{data_dir}/data", "-l", f"{data_dir}/server.log", "-w", *args]
    if os.getuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)


@pytest.fixture
def pg_cluster() -> Iterator[tuple[str, str]]:
    """A cluster of this test's own (restarting it must not disturb other tests' databases)."""
    url, data_dir = start_throwaway_postgres()
    try:
        yield url, data_dir
    finally:
        stop_throwaway_postgres(data_dir)


def _no_traceback(log: Path) -> None:
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]


async def test_postgres_restart_mid_run_loses_and_doubles_no_write(
    pg_cluster: tuple[str, str], tmp_path: Path
) -> None:
    server_url, data_dir = pg_cluster
    db_url = create_pg_database(server_url)
    # The throwaway cluster runs with synchronous_commit=off, which by design forgets the last
    # acknowledged commits in a crash (the immediate restart below); a store's database must not.
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{db_url.rsplit("/", 1)[1]}" SET synchronous_commit = on')
    log = tmp_path / "server.log"
    server = LiveServer(db_url, log).start()
    try:
        async with StoreClient(server.url, retry_seconds=60.0) as client:
            claim = await client.start_rollout({"task": "restart"})
            rollout_id, attempt_id = claim.rollout_id, claim.attempt.attempt_id
            sent_rollouts: list[str] = []
            sent_spans: list[str] = []
            sent_rewards: list[str] = []

            async def writer() -> None:
                for i in range(ROUNDS):
                    rid = f"ro-{uuid.uuid4().hex[:12]}"
                    await client.enqueue_many_rollouts([RolloutRequest(input={"i": i}, rollout_id=rid)])
                    sent_rollouts.append(rid)
                    span_id = f"{i:016x}"
                    span = SpanIn(
                        rollout_id=rollout_id,
                        attempt_id=attempt_id,
                        trace_id="0" * 32,
                        span_id=span_id,
                        name="step",
                    )
                    await client.add_many_spans([span])
                    sent_spans.append(span_id)
                    reward_id = f"rw-{i}"
                    await client.add_reward(
                        RewardIn(rollout_id=rollout_id, value=float(i), reward_id=reward_id, primary=False)
                    )
                    sent_rewards.append(reward_id)
                    await asyncio.sleep(0.01)

            async def restarter() -> None:
                while len(sent_rollouts) < ROUNDS // 4:
                    await asyncio.sleep(0.01)
                await asyncio.to_thread(_pg_ctl, data_dir, "-m", "fast", "restart")
                while len(sent_rollouts) < ROUNDS // 2:
                    await asyncio.sleep(0.01)
                await asyncio.to_thread(_pg_ctl, data_dir, "-m", "immediate", "restart")

            await asyncio.wait_for(asyncio.gather(writer(), restarter()), timeout=180)
            assert client.retries > 0, "the restarts were never seen: the test proves nothing"

        with psycopg.connect(db_url) as conn:
            rollouts = [
                r[0]
                for r in conn.execute("SELECT rollout_id FROM rollouts WHERE rollout_id <> %s", (rollout_id,))
            ]
            spans = [
                r[0] for r in conn.execute("SELECT span_id FROM spans WHERE attempt_id = %s", (attempt_id,))
            ]
            rewards = [
                r[0] for r in conn.execute("SELECT reward_id FROM rewards WHERE reward_id LIKE 'rw-%'")
            ]
        assert sorted(rollouts) == sorted(sent_rollouts)
        assert sorted(spans) == sorted(sent_spans)
        assert sorted(rewards) == sorted(sent_rewards)
        # The server went on without being restarted itself.
        assert httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200
    finally:
        server.stop()
    _no_traceback(log)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs of the test's own, unmounted afterwards."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(directory: Path) -> Path:
    """Write a file until the filesystem refuses; returns it (delete it to free the space)."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for size in (65536, 4096, 1):  # unbuffered: nothing is left to fail at close
            for _ in range(100_000):  # far more than the 4 MiB mount holds
                try:
                    os.write(fd, b"\0" * size)
                except OSError:
                    break
    finally:
        os.close(fd)
    return filler


def _rollout_body(i: int) -> dict[str, object]:
    return {"rollout_id": f"ro-disk-{i}", "input": {"blob": os.urandom(3000).hex(), "i": i}}


def test_disk_full_answers_507_keeps_data_and_recovers(small_disk: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    server = LiveServer(small_disk / "store.db", log).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for i in range(5):
                assert http.post("/v1/rollouts", json=[_rollout_body(i)]).status_code == 200
            filler = _fill(small_disk)
            failed = None
            for i in range(5, 200):  # the WAL may still have room for a few small pages
                answer = http.post("/v1/rollouts", json=[_rollout_body(i)])
                if answer.status_code != 200:
                    failed = (i, answer)
                    break
            assert failed is not None, "the full disk never refused a write"
            i, answer = failed
            assert answer.status_code == 507, answer.text
            body = answer.json()
            assert body["code"] == "insufficient_storage"
            assert "full" in body["message"], body
            assert "Traceback" not in answer.text
            # Nothing half-written: the refused rollout is absent, the earlier ones intact.
            assert http.get(f"/v1/rollouts/ro-disk-{i}").status_code == 404
            for j in range(5):
                got = http.get(f"/v1/rollouts/ro-disk-{j}")
                assert got.status_code == 200 and got.json()["input"]["i"] == j
            filler.unlink()
            again = http.post("/v1/rollouts", json=[_rollout_body(i)])
            assert again.status_code == 200, again.text
            assert http.get(f"/v1/rollouts/ro-disk-{i}").json()["input"]["i"] == i
    finally:
        server.stop()
    _no_traceback(log)


async def test_connection_lost_during_commit_is_500_not_retryable_503(
    pg_server: Callable[[], str], tmp_path: Path
) -> None:
    server_url = pg_server()
    db_url = create_pg_database(server_url)
    database = SqlDatabase(db_url)
    request = Request({"type": "http", "method": "POST", "path": "/v1/rollouts/dequeue", "headers": []})

    def terminate(pid: int) -> None:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    def lost_at_commit(conn: sa.Connection) -> int:
        pid = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
        terminate(pid)  # the next statement on this connection is the COMMIT
        return pid

    def lost_before_commit(conn: sa.Connection) -> int:
        pid = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
        terminate(pid)
        return conn.execute(sa.text("SELECT 1")).scalar_one()

    try:
        await database.ensure_schema()
        with pytest.raises(CommitOutcomeUnknownError) as unknown:
            await database.write(lost_at_commit)
        answer = answer_error(request, unknown.value)
        assert answer.status_code == 500
        assert "may or may not be stored" in orjson.loads(answer.body)["message"]
        # Lost before COMMIT: nothing was stored, so a retryable 503.
        with pytest.raises(sa.exc.DBAPIError) as before:
            await database.write(lost_before_commit)
        assert answer_error(request, before.value).status_code == 503
        # The database reconnects for the next write.
        assert await database.write(lambda conn: conn.execute(sa.text("SELECT 7")).scalar_one()) == 7
    finally:
        await database.close()
        drop_pg_database(server_url, db_url)
