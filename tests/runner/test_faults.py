"""Faults across processes: a SIGKILLed runner's rollout is requeued and finished elsewhere; SIGTERM stops cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lightningstore import AttemptStatus, RolloutConfig, RolloutStatus, SqlStore

HERE = Path(__file__).resolve().parent
DEADLINE = 30.0


def start_runner(
    db: Path, agent: str, log: Path, env: dict[str, str], *extra: str
) -> subprocess.Popen[bytes]:
    """The real CLI (`lightningrl runner`) in a subprocess over the shared SQLite file."""
    pythonpath = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "lightningrl.cli", "runner", "--store", str(db), "--agent", agent,
             "--workers", "1", "--heartbeat-interval", "0.2", "--no-progress", *extra],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env, "PYTHONPATH": pythonpath},
        )  # fmt: skip


async def wait_for_span(
    store: SqlStore, rollout_id: str, name: str, proc: subprocess.Popen[bytes], log: Path
) -> None:
    """Until the runner process has flushed span `name` (bounded)."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"runner exited early: {log.read_text()}"
        if await store.query_spans(rollout_id, name=name):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"span {name} never arrived: {log.read_text()}")


async def test_sigkilled_runner_rollout_is_requeued_and_finished_by_another(
    sql_store: SqlStore, tmp_path: Path
) -> None:
    from fault_agents import first_attempt_hangs

    from runner import Runner

    db = tmp_path / "store.db"
    config = RolloutConfig(unresponsive_seconds=1.0, max_attempts=2)
    item = await sql_store.enqueue_rollout("task", config=config, rollout_id="fault-1")
    env = {"FAULT_MARKER": str(tmp_path / "marker")}
    log = tmp_path / "runner-a.log"
    proc = start_runner(db, "fault_agents:first_attempt_hangs", log, env)
    try:
        await wait_for_span(sql_store, item.rollout_id, "step.before_hang", proc, log)
        # kill only once the reward row is committed too: the test is about what survives the kill
        deadline = time.monotonic() + DEADLINE
        while not await sql_store.query_rewards(item.rollout_id, name="progress"):
            assert time.monotonic() < deadline, f"the progress reward never arrived: {log.read_text()}"
            await asyncio.sleep(0.05)
    finally:
        proc.kill()  # SIGKILL: no handler, no finally, no last flush
        proc.wait(timeout=10)
    (dead,) = await sql_store.query_attempts(item.rollout_id)
    assert dead.status == AttemptStatus.RUNNING

    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        await sql_store.sweep_stale_attempts()
        stored = await sql_store.get_rollout_by_id(item.rollout_id)
        assert stored is not None
        if stored.status == RolloutStatus.REQUEUING:
            break
        await asyncio.sleep(0.2)
    assert stored.status == RolloutStatus.REQUEUING

    os.environ["FAULT_MARKER"] = env["FAULT_MARKER"]
    try:
        summary = await Runner(sql_store, first_attempt_hangs, workers=1, show_progress=False).run(
            max_rollouts=1
        )
    finally:
        del os.environ["FAULT_MARKER"]
    assert summary.succeeded == 1

    first, second = await sql_store.query_attempts(item.rollout_id)
    assert first.attempt_id == dead.attempt_id and first.status == AttemptStatus.UNRESPONSIVE
    assert second.status == AttemptStatus.SUCCEEDED
    final = await sql_store.get_rollout_by_id(item.rollout_id)
    assert final is not None and final.status == RolloutStatus.SUCCEEDED and final.num_attempts == 2
    dead_spans = await sql_store.query_spans(item.rollout_id, first.attempt_id)
    assert {s.name for s in dead_spans} >= {"step.before_hang", "lightningrl.reward"}
    assert {s.attempt_id for s in dead_spans} == {first.attempt_id}
    live_spans = await sql_store.query_spans(item.rollout_id, second.attempt_id)
    assert sorted(s.name for s in live_spans) == ["lightningrl.reward", "lightningrl.rollout"]
    rewards = {(r.name, r.attempt_id, r.value) for r in await sql_store.query_rewards(item.rollout_id)}
    assert rewards == {("progress", first.attempt_id, 0.5), ("reward", second.attempt_id, 1.0)}


async def test_sigterm_stops_the_cli_runner_and_fails_in_flight_as_runner_stopped(
    sql_store: SqlStore, tmp_path: Path
) -> None:
    item = await sql_store.enqueue_rollout("task", rollout_id="stopped-1")
    waiting = await sql_store.enqueue_rollout("next", rollout_id="stopped-2")
    log = tmp_path / "runner.log"
    proc = start_runner(tmp_path / "store.db", "fault_agents:always_hangs", log, {}, "--stop-timeout", "0.5")
    try:
        await wait_for_span(sql_store, item.rollout_id, "step.before_hang", proc, log)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=DEADLINE) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    (attempt,) = await sql_store.query_attempts(item.rollout_id)
    assert attempt.status == AttemptStatus.FAILED and attempt.failure_reason == "runner stopped"
    root = await sql_store.query_spans(item.rollout_id, name="lightningrl.rollout")
    assert root and root[0].events[0].attributes["reason"] == "stopped"
    untouched = await sql_store.get_rollout_by_id(waiting.rollout_id)
    assert untouched is not None and untouched.status == RolloutStatus.QUEUING
    assert "claimed=1" in log.read_text() and "failed=1" in log.read_text()
