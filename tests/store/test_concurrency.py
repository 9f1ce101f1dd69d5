"""Concurrency and crash tests on real databases with worker processes."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lightningstore import AttemptStatus, RolloutConfig, RolloutRequest, RolloutStatus, SpanIn, SqlStore

WORKER = str(Path(__file__).with_name("claim_worker.py"))
N_ROLLOUTS = 2000
N_WORKERS = 32


async def _prepare(url: str, requests: list[RolloutRequest]) -> list[str]:
    store = SqlStore(url)
    try:
        return [r.rollout_id for r in await store.enqueue_many_rollouts(requests)]
    finally:
        await store.close()


@pytest.mark.slow
async def test_every_rollout_claimed_exactly_once(db_url: str) -> None:
    ids = await _prepare(db_url, [RolloutRequest(input=i) for i in range(N_ROLLOUTS)])
    procs = [
        subprocess.Popen([sys.executable, WORKER, "all", db_url, f"w{i}"], stdout=subprocess.PIPE, text=True)
        for i in range(N_WORKERS)
    ]
    claimed: list[str] = []
    per_worker: list[int] = []
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0
        lines = out.split()
        claimed.extend(lines)
        per_worker.append(len(lines))
    assert len(claimed) == N_ROLLOUTS
    assert sorted(claimed) == sorted(ids)  # each exactly once, none lost
    assert sum(1 for n in per_worker if n > 0) > 1  # really concurrent
    store = SqlStore(db_url)
    stats = await store.statistics()
    await store.close()
    assert stats.rollouts_by_status == {"succeeded": N_ROLLOUTS}
    assert stats.attempts_by_status == {"succeeded": N_ROLLOUTS}


async def test_crashed_worker_is_requeued_and_finished_by_another(db_url: str) -> None:
    config = RolloutConfig(unresponsive_seconds=1.0, max_attempts=2)
    (rollout_id,) = await _prepare(db_url, [RolloutRequest(input="task", config=config)])
    dying = subprocess.Popen(
        [sys.executable, WORKER, "hang", db_url, "dying"], stdout=subprocess.PIPE, text=True
    )
    line = dying.stdout.readline().split()
    assert line[0] == rollout_id
    dead_attempt = line[1]
    dying.send_signal(signal.SIGKILL)
    dying.wait(timeout=10)

    store = SqlStore(db_url)
    try:
        deadline = time.monotonic() + 20
        while (await store.get_rollout_by_id(rollout_id)).status != RolloutStatus.REQUEUING:
            assert time.monotonic() < deadline, "the watchdog never requeued the silent attempt"
            await store.sweep_stale_attempts()
            await asyncio.sleep(0.2)
        rescuer = await store.dequeue_rollout("rescuer")
        assert rescuer.rollout_id == rollout_id and rescuer.attempt.sequence_id == 2
        await store.add_span(
            SpanIn(
                rollout_id=rollout_id,
                attempt_id=rescuer.attempt_id,
                trace_id="t",
                span_id="work",
                name="step",
            )
        )
        # the dead worker's buffered span arrives late: it stays under the dead attempt
        await store.add_span(
            SpanIn(rollout_id=rollout_id, attempt_id=dead_attempt, trace_id="t", span_id="late", name="step")
        )
        await store.update_attempt(rollout_id, rescuer.attempt_id, status="succeeded")
        assert (await store.get_rollout_by_id(rollout_id)).status == RolloutStatus.SUCCEEDED
        attempts = await store.query_attempts(rollout_id)
        assert [a.status for a in attempts] == [AttemptStatus.UNRESPONSIVE, AttemptStatus.SUCCEEDED]
        assert [s.span_id for s in await store.query_spans(rollout_id, dead_attempt)] == [
            "before-crash",
            "late",
        ]
        assert [s.span_id for s in await store.query_spans(rollout_id, "latest")] == ["work"]
    finally:
        await store.close()
