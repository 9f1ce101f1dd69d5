"""SQLite group commit: write calls queued together share a transaction, yet each stays all or nothing."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from lightningstore import ConflictError, NotFoundError, RewardIn, SpanIn, SqlStore


def span(rollout_id: str, attempt_id: str, span_id: str) -> SpanIn:
    return SpanIn(rollout_id=rollout_id, attempt_id=attempt_id, trace_id="t", span_id=span_id, name="step")


async def test_a_failing_call_rolls_back_only_itself(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    try:
        a = await store.start_rollout(1)
        b = await store.start_rollout(2)
        await store.add_reward(RewardIn(rollout_id=a.rollout_id, value=1.0, reward_id="rw-1"))
        # Hold the writer so the calls below queue up and run as one group.
        gate = threading.Event()
        blocker = asyncio.ensure_future(store.database.write(lambda conn: gate.wait(10)))
        await asyncio.sleep(0.05)
        calls = [
            asyncio.ensure_future(store.add_many_spans([span(a.rollout_id, a.attempt_id, "ok-a")])),
            # touches attempt a, then fails on the missing attempt: none of it may stay
            asyncio.ensure_future(
                store.add_many_spans(
                    [span(a.rollout_id, a.attempt_id, "bad"), span(a.rollout_id, "at-missing", "x")]
                )
            ),
            asyncio.ensure_future(
                store.add_reward(RewardIn(rollout_id=a.rollout_id, value=0.0, reward_id="rw-1"))
            ),
            asyncio.ensure_future(store.add_many_spans([span(b.rollout_id, b.attempt_id, "ok-b")])),
            asyncio.ensure_future(store.enqueue_rollout(3)),
        ]
        await asyncio.sleep(0.05)
        gate.set()
        await blocker
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert isinstance(results[1], NotFoundError)
        assert isinstance(results[2], ConflictError)
        assert [s.span_id for s in results[0]] == ["ok-a"]
        assert [s.span_id for s in results[3]] == ["ok-b"]
        assert [s.span_id for s in await store.query_spans(a.rollout_id)] == ["ok-a"]
        assert [s.span_id for s in await store.query_spans(b.rollout_id)] == ["ok-b"]
        assert (await store.get_rollout_by_id(results[4].rollout_id)).input == 3
        assert [r.value for r in await store.query_rewards(a.rollout_id)] == [1.0]
    finally:
        await store.close()


async def test_writes_after_close_are_refused(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    await store.enqueue_rollout(1)
    await store.close()
    with pytest.raises(RuntimeError, match="closed"):
        await store.enqueue_rollout(2)
