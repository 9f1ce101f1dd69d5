"""Group commit: write calls queued together share a transaction, yet each stays all or nothing."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from lightningstore import ConflictError, NotFoundError, RewardIn, RolloutRequest, SpanIn, SqlStore
from lightningstore.sql.group_commit import MAX_WAIT_TURNS, GroupCommitWriter


def span(rollout_id: str, attempt_id: str, span_id: str) -> SpanIn:
    return SpanIn(rollout_id=rollout_id, attempt_id=attempt_id, trace_id="t", span_id=span_id, name="step")


def _rename_then_fail(conn: sa.Connection, rollout_id: str) -> None:
    conn.execute(sa.text("UPDATE rollouts SET mode = 'val' WHERE rollout_id = :id"), {"id": rollout_id})
    raise ValueError("after the write")


async def test_a_failing_call_rolls_back_only_itself(db_url: str) -> None:
    # SQLite runs the group in savepoints; PostgreSQL in one plain transaction, then, as one call
    # failed, rolls it back and runs every call in a transaction of its own.
    store = SqlStore(db_url)
    try:
        a = await store.start_rollout(1)
        b = await store.start_rollout(2)
        await store.add_reward(RewardIn(rollout_id=a.rollout_id, value=1.0, reward_id="rw-1"))
        # Hold the writer (a heavy call runs on a helper thread) so the calls below queue up and run as one group.
        gate = threading.Event()
        groups: list[int] = []
        run_group = store.database._group_writer._run_group

        def counting(calls: list[Any]) -> None:
            groups.append(len(calls))
            run_group(calls)

        store.database._group_writer._run_group = counting  # type: ignore[union-attr]
        blocker = asyncio.ensure_future(store.database.write(lambda conn: gate.wait(10), rows=10_000))
        await asyncio.sleep(0.05)
        calls = [
            # commits with the rest, or (PostgreSQL, after the group failed) on its own: once either way
            asyncio.ensure_future(store.enqueue_rollout(3)),
            # writes, then fails: its write must not stay
            asyncio.ensure_future(store.database.write(lambda conn: _rename_then_fail(conn, b.rollout_id))),
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
        ]
        await asyncio.sleep(0.05)
        gate.set()
        await blocker
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert groups == [1, 6]
        assert [r.input for r in await store.query_rollouts()] == [1, 2, 3]
        assert (await store.get_rollout_by_id(results[0].rollout_id)).input == 3
        assert isinstance(results[1], ValueError)
        assert (await store.get_rollout_by_id(b.rollout_id)).mode == "train"
        assert [s.span_id for s in results[2]] == ["ok-a"]
        assert isinstance(results[3], NotFoundError)
        assert isinstance(results[4], ConflictError)
        assert [s.span_id for s in results[5]] == ["ok-b"]
        assert [s.span_id for s in await store.query_spans(a.rollout_id)] == ["ok-a"]
        assert [s.span_id for s in await store.query_spans(b.rollout_id)] == ["ok-b"]
        assert [r.value for r in await store.query_rewards(a.rollout_id)] == [1.0]
    finally:
        await store.close()


async def test_writes_after_close_are_refused(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    await store.enqueue_rollout(1)
    await store.close()
    with pytest.raises(RuntimeError, match="closed"):
        await store.enqueue_rollout(2)


async def test_the_writes_of_one_loop_turn_commit_together_on_the_loop_thread(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    try:
        await store.enqueue_rollout(0)  # schema and connection ready
        threads: list[tuple[str, int]] = []
        run_group = store.database._run_group

        def recording(calls: list[Any]) -> None:
            threads.append((threading.current_thread().name, len(calls)))
            run_group(calls)

        store.database._group_writer._run_group = recording  # type: ignore[union-attr]
        many = await asyncio.gather(*(store.enqueue_rollout(i) for i in range(1, 11)))
        assert threads == [(threading.current_thread().name, 10)]
        big = await store.enqueue_many_rollouts([RolloutRequest(input=i) for i in range(300)])
        assert threads[-1][0].startswith("lightningstore-write") and threads[-1][1] == 1
        # a light write queued while the heavy one commits follows it, and nothing is lost
        heavy = asyncio.ensure_future(
            store.enqueue_many_rollouts([RolloutRequest(input=i) for i in range(300)])
        )
        await asyncio.sleep(0)
        light = await store.enqueue_rollout("after")
        assert heavy.done() and len(heavy.result()) == 300
        rollouts = await store.query_rollouts()
        assert len(rollouts) == 1 + len(many) + len(big) + 300 + 1
        assert rollouts[-1].rollout_id == light.rollout_id
    finally:
        await store.close()


async def test_close_waits_for_queued_writes(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    await store.enqueue_rollout(0)
    pending = [asyncio.ensure_future(store.enqueue_rollout(i)) for i in range(1, 6)]
    pending.append(
        asyncio.ensure_future(store.enqueue_many_rollouts([RolloutRequest(input=i) for i in range(300)]))
    )
    await asyncio.sleep(0)  # submitted, not yet committed
    await store.close()
    assert all(p.done() and p.exception() is None for p in pending)
    reopened = SqlStore(tmp_path / "store.db")
    try:
        assert len(await reopened.query_rollouts()) == 1 + 5 + 300
    finally:
        await reopened.close()


async def test_a_group_waits_a_few_turns_while_calls_keep_arriving_and_a_lone_call_does_not() -> None:
    sizes: list[int] = []
    writer = GroupCommitWriter(lambda calls: sizes.append(len(calls)))
    loop = asyncio.get_running_loop()
    futures: list[asyncio.Future[Any]] = []

    def submit_two(turns_left: int) -> None:
        futures.extend(writer.submit(lambda conn: None) for _ in range(2))
        if turns_left:
            loop.call_soon(submit_two, turns_left - 1)

    submit_two(5)  # two calls a loop turn, for six turns
    while len(futures) < 12 or not all(f.done() for f in futures):
        await asyncio.sleep(0)
    # The first group waits MAX_WAIT_TURNS turns (calls kept coming), then commits; the rest wait
    # until a turn brings nothing new.
    assert sizes == [2 * (MAX_WAIT_TURNS + 1), 12 - 2 * (MAX_WAIT_TURNS + 1)]

    lone = writer.submit(lambda conn: None)
    await asyncio.sleep(0)  # one loop turn: the flush scheduled by the submit has run
    assert lone.done() and sizes[-1] == 1
    writer.close()
