"""Contract: spans, rewards, the watchdog, late spans, queries — against every backend."""

from __future__ import annotations

import time

import pytest

from lightningstore import (
    AttemptStatus,
    ConflictError,
    InvalidInputError,
    LightningStore,
    NotFoundError,
    RewardIn,
    RolloutConfig,
    RolloutRequest,
    RolloutStatus,
    SpanIn,
)


def span(rollout_id: str, attempt_id: str, span_id: str, **kw) -> SpanIn:
    return SpanIn(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        trace_id="t1",
        span_id=span_id,
        name=kw.pop("name", "step"),
        **kw,
    )


async def test_spans_idempotent_and_ordered(store: LightningStore) -> None:
    c = await store.start_rollout(1)
    first = await store.add_span(
        span(c.rollout_id, c.attempt_id, "s1", attributes={"ids": [1, 2, 3], "x": "y"})
    )
    assert (await store.get_rollout_by_id(c.rollout_id)).status == RolloutStatus.RUNNING
    assert (await store.get_latest_attempt(c.rollout_id)).status == AttemptStatus.RUNNING
    again = await store.add_span(span(c.rollout_id, c.attempt_id, "s1", attributes={"changed": True}))
    assert again == first  # a repeat returns the stored copy unchanged
    batch = await store.add_many_spans(
        [span(c.rollout_id, c.attempt_id, f"b{i}") for i in range(5)]
        + [span(c.rollout_id, c.attempt_id, "s1")]
    )
    assert [s.span_id for s in batch] == ["b0", "b1", "b2", "b3", "b4", "s1"]
    seqs = [s.sequence_id for s in batch[:5]]
    assert seqs == sorted(seqs) and seqs[0] > first.sequence_id
    stored = await store.query_spans(c.rollout_id)
    assert [s.span_id for s in stored] == ["s1", "b0", "b1", "b2", "b3", "b4"]
    assert stored[0].attributes == {"ids": [1, 2, 3], "x": "y"}
    page = await store.query_spans(c.rollout_id, after_sequence_id=stored[2].sequence_id, limit=2)
    assert [s.span_id for s in page] == ["b2", "b3"]
    assert [s.span_id for s in await store.query_spans(c.rollout_id, name="nope")] == []


async def test_span_bad_input_stores_nothing(store: LightningStore) -> None:
    c = await store.start_rollout(1)
    other = await store.start_rollout(2)
    with pytest.raises(NotFoundError):
        await store.add_many_spans(
            [span(c.rollout_id, c.attempt_id, "ok"), span(c.rollout_id, "at-missing", "bad")]
        )
    with pytest.raises(InvalidInputError, match="rollout_id"):
        await store.add_many_spans(
            [span(c.rollout_id, c.attempt_id, "ok"), span(other.rollout_id, c.attempt_id, "bad")]
        )
    # One span alone (PostgreSQL checks and inserts it in one statement): the same refusals.
    with pytest.raises(NotFoundError):
        await store.add_span(span(c.rollout_id, "at-missing", "bad"))
    with pytest.raises(InvalidInputError, match="rollout_id"):
        await store.add_span(span(other.rollout_id, c.attempt_id, "bad"))
    assert await store.query_spans(c.rollout_id) == [] and await store.query_spans(other.rollout_id) == []
    assert (await store.get_latest_attempt(c.rollout_id)).status == AttemptStatus.PREPARING
    with pytest.raises(ValueError, match="span_id"):
        SpanIn(rollout_id="r", attempt_id="a", trace_id="t", span_id="", name="x")


async def test_spans_of_each_attempt_stay_with_it(store: LightningStore) -> None:
    r = await store.enqueue_rollout(1, config=RolloutConfig(max_attempts=2, retry_on=["failed"]))
    a1 = await store.dequeue_rollout()
    await store.add_span(span(r.rollout_id, a1.attempt_id, "x1"))
    await store.update_attempt(r.rollout_id, a1.attempt_id, status="failed")
    a2 = await store.dequeue_rollout()
    await store.add_span(span(r.rollout_id, a2.attempt_id, "x2"))
    late = await store.add_span(span(r.rollout_id, a1.attempt_id, "late"))  # the dead attempt speaks again
    assert late.attempt_id == a1.attempt_id
    assert (await store.get_latest_attempt(r.rollout_id)).attempt_id == a2.attempt_id
    assert [s.span_id for s in await store.query_spans(r.rollout_id, a1.attempt_id)] == ["x1", "late"]
    assert [s.span_id for s in await store.query_spans(r.rollout_id, "latest")] == ["x2"]
    assert [s.span_id for s in await store.query_spans(r.rollout_id)] == ["x1", "x2", "late"]
    assert (await store.query_attempts(r.rollout_id))[0].status == AttemptStatus.FAILED


async def test_watchdog_timeout_requeues_then_fails(store: LightningStore) -> None:
    config = RolloutConfig(timeout_seconds=5, max_attempts=2, retry_on=["timeout"])
    r = await store.enqueue_rollout(1, config=config)
    a1 = await store.dequeue_rollout()
    assert await store.sweep_stale_attempts(now=time.time() + 1) == []
    changed = await store.sweep_stale_attempts(now=time.time() + 10)
    assert [(a.attempt_id, a.status) for a in changed] == [(a1.attempt_id, AttemptStatus.TIMEOUT)]
    assert (await store.get_rollout_by_id(r.rollout_id)).status == RolloutStatus.REQUEUING
    a2 = await store.dequeue_rollout()
    assert a2.attempt.sequence_id == 2
    await store.sweep_stale_attempts(now=time.time() + 10)
    final = await store.get_rollout_by_id(r.rollout_id)
    assert final.status == RolloutStatus.FAILED and "timeout" in final.failure_reason


async def test_watchdog_unresponsive_and_revival(store: LightningStore) -> None:
    # Not retried: the attempt can come back with a late span.
    r = await store.enqueue_rollout(1, config=RolloutConfig(unresponsive_seconds=5, retry_on=[]))
    c = await store.dequeue_rollout()
    await store.heartbeat(r.rollout_id, c.attempt_id)
    changed = await store.sweep_stale_attempts(now=time.time() + 10)
    assert [a.status for a in changed] == [AttemptStatus.UNRESPONSIVE]
    assert (await store.get_rollout_by_id(r.rollout_id)).status == RolloutStatus.RUNNING
    await store.add_span(span(r.rollout_id, c.attempt_id, "back"))
    assert (await store.get_latest_attempt(r.rollout_id)).status == AttemptStatus.RUNNING
    # Retried: the rollout requeues and the dead attempt's late spans stay with it.
    r2 = await store.enqueue_rollout(2, config=RolloutConfig(unresponsive_seconds=5, max_attempts=2))
    d = await store.dequeue_rollout()
    await store.sweep_stale_attempts(now=time.time() + 10)
    assert (await store.get_rollout_by_id(r2.rollout_id)).status == RolloutStatus.REQUEUING
    await store.add_span(span(r2.rollout_id, d.attempt_id, "late"))
    assert (await store.query_attempts(r2.rollout_id))[0].status == AttemptStatus.UNRESPONSIVE
    assert (await store.get_rollout_by_id(r2.rollout_id)).status == RolloutStatus.REQUEUING


async def test_rewards(store: LightningStore) -> None:
    c = await store.start_rollout(1)
    s = await store.add_span(span(c.rollout_id, c.attempt_id, "llm1", name="chat"))
    step = await store.add_reward(
        RewardIn(
            rollout_id=c.rollout_id,
            attempt_id=c.attempt_id,
            name="tool_ok",
            value=0.5,
            span_id=s.span_id,
            primary=False,
        )
    )
    final = await store.add_reward(RewardIn(rollout_id=c.rollout_id, value=1.0, reward_id="rw-final"))
    again = await store.add_reward(RewardIn(rollout_id=c.rollout_id, value=1.0, reward_id="rw-final"))
    assert again == final
    with pytest.raises(ConflictError):
        await store.add_reward(RewardIn(rollout_id=c.rollout_id, value=0.0, reward_id="rw-final"))
    assert [(w.name, w.value) for w in await store.query_rewards(c.rollout_id)] == [
        ("tool_ok", 0.5),
        ("reward", 1.0),
    ]
    assert [w.reward_id for w in await store.query_rewards(c.rollout_id, name="tool_ok")] == [step.reward_id]
    with pytest.raises(NotFoundError):
        await store.add_reward(RewardIn(rollout_id="missing", value=1.0))
    with pytest.raises(NotFoundError):
        await store.add_reward(RewardIn(rollout_id=c.rollout_id, attempt_id="at-missing", value=1.0))
    with pytest.raises(ValueError, match="finite"):
        RewardIn(rollout_id=c.rollout_id, value=float("nan"))
    assert len(await store.query_rewards(c.rollout_id)) == 2


async def test_query_rollouts_filters_sort_pagination(store: LightningStore) -> None:
    made = await store.enqueue_many_rollouts(
        [RolloutRequest(input=i, mode="val" if i % 2 else "train", group_id=f"g{i % 3}") for i in range(10)]
    )
    ids = [m.rollout_id for m in made]
    assert [r.rollout_id for r in await store.query_rollouts()] == ids
    assert [r.rollout_id for r in await store.query_rollouts(descending=True)] == ids[::-1]
    pages = [await store.query_rollouts(limit=4, offset=o) for o in (0, 4, 8)]
    assert [r.rollout_id for p in pages for r in p] == ids
    assert {r.input for r in await store.query_rollouts(mode="val")} == {1, 3, 5, 7, 9}
    assert {r.input for r in await store.query_rollouts(group_id="g0")} == {0, 3, 6, 9}
    c = await store.dequeue_rollout()
    assert [r.rollout_id for r in await store.query_rollouts(status=["preparing"])] == [c.rollout_id]
    assert len(await store.query_rollouts(status=["queuing", "preparing"])) == 10
    assert [r.rollout_id for r in await store.query_rollouts(rollout_ids=ids[2:4])] == ids[2:4]
    by_id = await store.query_rollouts(sort_by="rollout_id")
    assert [r.rollout_id for r in by_id] == sorted(ids)
    for bad in ({"sort_by": "input"}, {"limit": -1}, {"offset": -2}, {"status": ["nope"]}, {"mode": "prod"}):
        with pytest.raises(InvalidInputError):
            await store.query_rollouts(**bad)
    with pytest.raises(NotFoundError):
        await store.query_attempts("missing")


async def test_workers_and_statistics(store: LightningStore) -> None:
    w = await store.update_worker("w1", status="idle", metadata={"host": "a"})
    assert w.worker_id == "w1" and w.metadata == {"host": "a"}
    await store.update_worker("w1", status="busy")
    workers = await store.query_workers()
    assert [(x.worker_id, x.status, x.metadata) for x in workers] == [("w1", "busy", {"host": "a"})]
    with pytest.raises(InvalidInputError):
        await store.update_worker("w1", status="sleepy")
    c = await store.start_rollout(1)
    await store.add_span(span(c.rollout_id, c.attempt_id, "a"))
    await store.add_reward(RewardIn(rollout_id=c.rollout_id, value=1))
    await store.enqueue_rollout(2)
    stats = await store.statistics()
    assert stats.total_rollouts == 2 and stats.rollouts_by_status == {"running": 1, "queuing": 1}
    assert stats.total_attempts == 1 and stats.total_spans == 1 and stats.total_rewards == 1
    assert stats.total_workers == 1


async def test_nan_and_infinity_in_span_attributes_are_kept_as_otlp_strings(store: LightningStore) -> None:
    # Refusing the span would lose its telemetry; null would lose the value: OTLP's JSON strings keep it.
    c = await store.start_rollout(1)
    sent = span(
        c.rollout_id,
        c.attempt_id,
        "s1",
        attributes={"logprob": float("-inf"), "scores": [0.5, float("nan")], "ids": [1, 2]},
        events=[{"name": "e", "attributes": {"x": float("inf")}}],
        resource={"service.name": "agent", "load": float("nan")},
    )
    assert sent.attributes == {"logprob": "-Infinity", "scores": [0.5, "NaN"], "ids": [1, 2]}
    stored = await store.add_span(sent)
    (queried,) = await store.query_spans(c.rollout_id)
    for got in (stored, queried):
        assert got.attributes == sent.attributes
        assert got.events[0].attributes == {"x": "Infinity"}
        assert got.resource == {"service.name": "agent", "load": "NaN"}
    with pytest.raises(ValueError, match="finite"):
        span(c.rollout_id, c.attempt_id, "s2", start_time=float("nan"))
