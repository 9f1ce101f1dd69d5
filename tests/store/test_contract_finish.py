"""Contract: `finish_attempt` — last spans, rewards and the ending in one call — against every backend."""

from __future__ import annotations

import pytest

from lightningstore import (
    AttemptStatus,
    IllegalTransitionError,
    InvalidInputError,
    LightningStore,
    NotFoundError,
    RewardIn,
    RolloutConfig,
    RolloutStatus,
    SpanIn,
)


def span(rollout_id: str, attempt_id: str, span_id: str) -> SpanIn:
    return SpanIn(rollout_id=rollout_id, attempt_id=attempt_id, trace_id="t1", span_id=span_id, name="step")


async def test_finish_stores_spans_rewards_and_ends_the_attempt(store: LightningStore) -> None:
    c = await store.start_rollout({"q": 1})
    reward = RewardIn(rollout_id=c.rollout_id, name="reward", value=0.5, primary=True)  # no attempt_id
    ended = await store.finish_attempt(
        c.rollout_id,
        c.attempt_id,
        status="succeeded",
        spans=[span(c.rollout_id, c.attempt_id, "s1"), span(c.rollout_id, c.attempt_id, "s2")],
        rewards=[reward],
    )
    assert ended.status == AttemptStatus.SUCCEEDED and ended.end_time is not None
    assert (await store.get_rollout_by_id(c.rollout_id)).status == RolloutStatus.SUCCEEDED
    assert [s.span_id for s in await store.query_spans(c.rollout_id)] == ["s1", "s2"]
    (stored,) = await store.query_rewards(c.rollout_id)
    assert (stored.value, stored.attempt_id, stored.primary) == (0.5, c.attempt_id, True)

    # The same finish again (a retried request) changes nothing and stores nothing twice.
    again = await store.finish_attempt(
        c.rollout_id,
        c.attempt_id,
        status=AttemptStatus.SUCCEEDED,
        spans=[span(c.rollout_id, c.attempt_id, "s1")],
        rewards=[stored],
    )
    assert again.status == AttemptStatus.SUCCEEDED and again.end_time == ended.end_time
    assert len(await store.query_spans(c.rollout_id)) == 2
    assert len(await store.query_rewards(c.rollout_id)) == 1


async def test_finish_with_a_failure_requeues_like_update_attempt(store: LightningStore) -> None:
    r = await store.enqueue_rollout(1, config=RolloutConfig(max_attempts=2, retry_on=["failed"]))
    c = await store.dequeue_rollout("w1")
    assert c is not None and c.rollout_id == r.rollout_id
    ended = await store.finish_attempt(c.rollout_id, c.attempt_id, status="failed", failure_reason="boom")
    assert (ended.status, ended.failure_reason) == (AttemptStatus.FAILED, "boom")
    assert (await store.get_rollout_by_id(r.rollout_id)).status == RolloutStatus.REQUEUING


async def test_finish_of_an_attempt_ended_elsewhere_keeps_its_telemetry(store: LightningStore) -> None:
    c = await store.start_rollout(1)
    await store.cancel_rollout(c.rollout_id)
    reward = RewardIn(rollout_id=c.rollout_id, attempt_id=c.attempt_id, name="reward", value=1.0)
    with pytest.raises(IllegalTransitionError):
        await store.finish_attempt(
            c.rollout_id,
            c.attempt_id,
            status="succeeded",
            spans=[span(c.rollout_id, c.attempt_id, "late")],
            rewards=[reward],
        )
    assert [s.span_id for s in await store.query_spans(c.rollout_id)] == ["late"]
    assert [r.value for r in await store.query_rewards(c.rollout_id)] == [1.0]
    assert (await store.get_rollout_by_id(c.rollout_id)).status == RolloutStatus.CANCELLED


async def test_finish_refuses_bad_input_and_stores_nothing(store: LightningStore) -> None:
    c = await store.start_rollout(1)
    other = await store.start_rollout(2)
    mine = span(c.rollout_id, c.attempt_id, "s1")
    with pytest.raises(InvalidInputError, match="status"):
        await store.finish_attempt(c.rollout_id, c.attempt_id, status="running", spans=[mine])
    with pytest.raises(InvalidInputError, match="status"):
        await store.finish_attempt(c.rollout_id, c.attempt_id, status="done")
    with pytest.raises(InvalidInputError, match="spans"):
        await store.finish_attempt(
            c.rollout_id,
            c.attempt_id,
            status="succeeded",
            spans=[mine, span(other.rollout_id, other.attempt_id, "s2")],
        )
    with pytest.raises(InvalidInputError, match="rewards"):
        await store.finish_attempt(
            c.rollout_id,
            c.attempt_id,
            status="succeeded",
            rewards=[RewardIn(rollout_id=other.rollout_id, name="reward", value=1.0)],
        )
    with pytest.raises(NotFoundError):
        await store.finish_attempt(c.rollout_id, "at-missing", status="succeeded")
    assert await store.query_spans(c.rollout_id) == []
    assert await store.query_spans(other.rollout_id) == []
    assert await store.query_rewards(other.rollout_id) == []
    assert (await store.get_latest_attempt(c.rollout_id)).status == AttemptStatus.PREPARING
