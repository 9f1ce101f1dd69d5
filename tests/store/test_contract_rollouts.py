"""Contract: enqueue, claim, attempts, transitions, retries — against every backend."""

from __future__ import annotations

import asyncio

import pytest

from lightningstore import (
    AttemptStatus,
    ConflictError,
    IllegalTransitionError,
    InvalidInputError,
    LightningStore,
    NotFoundError,
    RolloutConfig,
    RolloutRequest,
    RolloutStatus,
)


async def test_enqueue_and_get(store: LightningStore) -> None:
    r = await store.enqueue_rollout({"task": 1}, mode="val", metadata={"k": "v"}, group_id="g1")
    assert r.status == RolloutStatus.QUEUING
    got = await store.get_rollout_by_id(r.rollout_id)
    assert got is not None
    assert got.input == {"task": 1}
    assert got.mode == "val"
    assert got.metadata == {"k": "v"}
    assert got.group_id == "g1"
    assert got.num_attempts == 0
    assert await store.get_rollout_by_id("nope") is None


async def test_enqueue_idempotent_on_given_id(store: LightningStore) -> None:
    a = await store.enqueue_rollout({"x": 1}, rollout_id="fixed-1")
    b = await store.enqueue_rollout({"x": 1}, rollout_id="fixed-1")
    assert a.rollout_id == b.rollout_id == "fixed-1"
    assert len(await store.query_rollouts()) == 1
    with pytest.raises(ConflictError):
        await store.enqueue_rollout({"x": 2}, rollout_id="fixed-1")


async def test_enqueue_many_is_all_or_nothing(store: LightningStore) -> None:
    reqs = [RolloutRequest(input=i) for i in range(3)] + [RolloutRequest(input=9, resources_id="rs-missing")]
    with pytest.raises(NotFoundError):
        await store.enqueue_many_rollouts(reqs)
    assert await store.query_rollouts() == []
    with pytest.raises(InvalidInputError):
        await store.enqueue_many_rollouts(
            [RolloutRequest(input=1, rollout_id="d"), RolloutRequest(input=2, rollout_id="d")]
        )
    assert await store.query_rollouts() == []
    made = await store.enqueue_many_rollouts([RolloutRequest(input=i) for i in range(5)])
    assert [r.input for r in made] == [0, 1, 2, 3, 4]


def test_invalid_config_names_the_field() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RolloutConfig(max_attempts=0)
    with pytest.raises(ValueError, match="retry_on"):
        RolloutConfig(retry_on=["succeeded"])


async def test_dequeue_oldest_first_and_opens_attempt(store: LightningStore) -> None:
    made = await store.enqueue_many_rollouts([RolloutRequest(input=i) for i in range(3)])
    claimed = await store.dequeue_rollout(worker_id="w1")
    assert claimed is not None
    assert claimed.rollout_id == made[0].rollout_id
    assert claimed.rollout.status == RolloutStatus.PREPARING
    assert claimed.attempt.status == AttemptStatus.PREPARING
    assert claimed.attempt.sequence_id == 1
    assert claimed.attempt.worker_id == "w1"
    stored = await store.get_rollout_by_id(made[0].rollout_id)
    assert stored.status == RolloutStatus.PREPARING and stored.num_attempts == 1
    rest = await store.dequeue_many_rollouts(10, worker_id="w2")
    assert [c.rollout_id for c in rest] == [m.rollout_id for m in made[1:]]
    assert await store.dequeue_rollout() is None
    with pytest.raises(InvalidInputError):
        await store.dequeue_many_rollouts(0)
    workers = {w.worker_id: w for w in await store.query_workers()}
    assert workers["w1"].current_rollout_id == made[0].rollout_id


async def test_a_waiting_claim_takes_the_rollout_queued_while_it_waits(store: LightningStore) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    waiting = asyncio.create_task(store.dequeue_rollout(worker_id="idle", wait=20))
    await asyncio.sleep(0.3)
    assert not waiting.done()  # nothing queued: it waits instead of answering None
    queued = await store.enqueue_rollout({"late": 1})
    claimed = await asyncio.wait_for(waiting, 15)
    assert claimed is not None and claimed.rollout_id == queued.rollout_id
    assert claimed.attempt.worker_id == "idle"
    assert loop.time() - started < 15  # woken by the enqueue, not by its 20 s running out


async def test_a_waiting_claim_that_nothing_reaches_returns_none_after_its_wait(
    store: LightningStore,
) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await store.dequeue_rollout(wait=0.4) is None
    assert loop.time() - started >= 0.35
    assert await store.query_rollouts() == []


async def test_waiting_claims_share_what_is_queued_each_rollout_once(store: LightningStore) -> None:
    waiters = [asyncio.create_task(store.dequeue_rollout(worker_id=f"w{i}", wait=3)) for i in range(6)]
    await asyncio.sleep(0.2)
    made = await store.enqueue_many_rollouts([RolloutRequest(input=i) for i in range(4)])
    claimed = [c for c in await asyncio.gather(*waiters) if c is not None]
    assert sorted(c.rollout_id for c in claimed) == sorted(m.rollout_id for m in made)
    assert {c.attempt.worker_id for c in claimed} <= {f"w{i}" for i in range(6)}
    assert len({c.attempt.worker_id for c in claimed}) == 4  # one rollout per waiting claim


async def test_a_requeued_rollout_wakes_a_waiting_claim(store: LightningStore) -> None:
    config = RolloutConfig(max_attempts=2, retry_on=["failed"])
    queued = await store.enqueue_rollout(1, config=config)
    first = await store.dequeue_rollout(worker_id="a")
    assert first is not None
    waiting = asyncio.create_task(store.dequeue_rollout(worker_id="b", wait=20))
    await asyncio.sleep(0.2)
    await store.update_attempt(queued.rollout_id, first.attempt_id, status="failed")
    second = await asyncio.wait_for(waiting, 15)
    assert second is not None and second.rollout_id == queued.rollout_id
    assert second.attempt.sequence_id == 2


async def test_a_claim_wait_out_of_range_names_the_field(store: LightningStore) -> None:
    await store.enqueue_rollout(1)
    for wait in (-1, float("nan"), float("inf"), 31, True):
        with pytest.raises(InvalidInputError, match="wait"):
            await store.dequeue_rollout(wait=wait)
    assert (await store.query_rollouts())[0].status == RolloutStatus.QUEUING  # nothing claimed


async def test_start_rollout_and_start_attempt(store: LightningStore) -> None:
    started = await store.start_rollout({"q": 1}, worker_id="w")
    assert started.rollout.status == RolloutStatus.PREPARING
    assert started.attempt.sequence_id == 1
    with pytest.raises(IllegalTransitionError):
        await store.start_attempt(started.rollout_id)
    queued = await store.enqueue_rollout(1)
    manual = await store.start_attempt(queued.rollout_id, worker_id="w2")
    assert manual.attempt.worker_id == "w2"
    assert await store.dequeue_rollout() is None
    with pytest.raises(NotFoundError):
        await store.start_attempt("missing")


async def test_start_rollout_keeps_what_enqueue_keeps(store: LightningStore) -> None:
    started = await store.start_rollout(
        {"q": 2},
        mode="val",
        metadata={"k": 1},
        group_id="g",
        worker_id="w",
        config=RolloutConfig(max_attempts=3),
    )
    stored = await store.get_rollout_by_id(started.rollout_id)
    assert stored is not None
    assert (stored.mode, stored.metadata, stored.group_id) == ("val", {"k": 1}, "g")
    assert stored.config.max_attempts == 3
    assert (stored.status, started.attempt.worker_id) == (RolloutStatus.PREPARING, "w")


async def test_enqueue_and_start_refuse_a_bad_argument_naming_it(store: LightningStore) -> None:
    for call in (store.enqueue_rollout, store.start_rollout):
        with pytest.raises(InvalidInputError, match="mode") as bad_mode:
            await call(1, mode="bogus")
        assert "bogus" in str(bad_mode.value)
        with pytest.raises(InvalidInputError, match="group_id"):
            await call(1, group_id="g" * 201)
    assert await store.query_rollouts() == []


def test_a_rollout_request_of_arguments_fills_the_defaults() -> None:
    request = RolloutRequest.of({"q": 1}, mode="test", group_id="g")
    assert request == RolloutRequest(input={"q": 1}, mode="test", group_id="g")
    assert (request.config, request.metadata, request.rollout_id) == (RolloutConfig(), {}, None)
    with pytest.raises(InvalidInputError, match="rollout_id"):
        RolloutRequest.of(1, rollout_id="")


async def test_heartbeat_moves_to_running(store: LightningStore) -> None:
    c = await store.start_rollout(1)
    a = await store.heartbeat(c.rollout_id, c.attempt_id, worker_id="w")
    assert a.status == AttemptStatus.RUNNING and a.last_heartbeat_time is not None
    assert (await store.get_rollout_by_id(c.rollout_id)).status == RolloutStatus.RUNNING
    await store.update_attempt(c.rollout_id, c.attempt_id, status="succeeded")
    with pytest.raises(IllegalTransitionError):
        await store.heartbeat(c.rollout_id, c.attempt_id)
    with pytest.raises(NotFoundError):
        await store.heartbeat(c.rollout_id, "at-missing")


async def test_success_finishes_rollout(store: LightningStore) -> None:
    c = await store.start_rollout(1)
    a = await store.update_attempt(c.rollout_id, c.attempt_id, status="succeeded")
    assert a.status == AttemptStatus.SUCCEEDED and a.end_time is not None
    r = await store.get_rollout_by_id(c.rollout_id)
    assert r.status == RolloutStatus.SUCCEEDED and r.end_time is not None


async def test_failure_requeues_while_attempts_remain(store: LightningStore) -> None:
    config = RolloutConfig(max_attempts=2, retry_on=["failed"])
    r = await store.enqueue_rollout(1, config=config)
    first = await store.dequeue_rollout("w1")
    await store.update_attempt(r.rollout_id, first.attempt_id, status="failed", failure_reason="boom")
    assert (await store.get_rollout_by_id(r.rollout_id)).status == RolloutStatus.REQUEUING
    second = await store.dequeue_rollout("w2")
    assert second.rollout_id == r.rollout_id and second.attempt.sequence_id == 2
    await store.update_attempt(r.rollout_id, "latest", status="failed", failure_reason="boom again")
    final = await store.get_rollout_by_id(r.rollout_id)
    assert final.status == RolloutStatus.FAILED
    assert final.failure_reason == "boom again"
    attempts = await store.query_attempts(r.rollout_id)
    assert [(a.sequence_id, a.status, a.failure_reason) for a in attempts] == [
        (1, AttemptStatus.FAILED, "boom"),
        (2, AttemptStatus.FAILED, "boom again"),
    ]
    assert (await store.get_latest_attempt(r.rollout_id)).attempt_id == second.attempt_id


async def test_failure_kind_not_in_retry_on_fails(store: LightningStore) -> None:
    r = await store.enqueue_rollout(1, config=RolloutConfig(max_attempts=3, retry_on=["timeout"]))
    c = await store.dequeue_rollout()
    await store.update_attempt(r.rollout_id, c.attempt_id, status="failed")
    assert (await store.get_rollout_by_id(r.rollout_id)).status == RolloutStatus.FAILED


ATTEMPT_STATES = list(AttemptStatus)


async def _attempt_in(store: LightningStore, status: AttemptStatus) -> tuple[str, str]:
    c = await store.start_rollout(1, config=RolloutConfig(max_attempts=1, retry_on=[]))
    if status == AttemptStatus.RUNNING:
        await store.heartbeat(c.rollout_id, c.attempt_id)
    elif status != AttemptStatus.PREPARING:
        await store.update_attempt(c.rollout_id, c.attempt_id, status=status)
    return c.rollout_id, c.attempt_id


@pytest.mark.parametrize("source", ATTEMPT_STATES)
async def test_attempt_transition_table(store: LightningStore, source: AttemptStatus) -> None:
    from lightningstore.data.status import ATTEMPT_TRANSITIONS

    for target in ATTEMPT_STATES:
        if target == source:
            continue
        rollout_id, attempt_id = await _attempt_in(store, source)
        before = await store.query_attempts(rollout_id)
        if target in ATTEMPT_TRANSITIONS[source]:
            moved = await store.update_attempt(rollout_id, attempt_id, status=target)
            assert moved.status == target
        else:
            with pytest.raises(IllegalTransitionError, match=f"{source.value} -> {target.value}"):
                await store.update_attempt(rollout_id, attempt_id, status=target)
            assert await store.query_attempts(rollout_id) == before


async def test_update_attempt_bad_input(store: LightningStore) -> None:
    c = await store.start_rollout(1)
    with pytest.raises(InvalidInputError, match="status"):
        await store.update_attempt(c.rollout_id, c.attempt_id, status="exploded")
    with pytest.raises(NotFoundError):
        await store.update_attempt("nope", c.attempt_id, status="failed")
    other = await store.start_rollout(2)
    with pytest.raises(NotFoundError):
        await store.update_attempt(other.rollout_id, c.attempt_id, status="failed")
    a = await store.update_attempt(c.rollout_id, c.attempt_id, metadata={"m": 1}, worker_id="w9")
    assert a.metadata == {"m": 1} and a.worker_id == "w9" and a.status == AttemptStatus.PREPARING


async def _rollout_in(store: LightningStore, status: RolloutStatus) -> str:
    config = RolloutConfig(max_attempts=2, retry_on=["failed"])
    r = await store.enqueue_rollout(1, config=config)
    if status == RolloutStatus.QUEUING:
        return r.rollout_id
    c = await store.dequeue_rollout()
    assert c.rollout_id == r.rollout_id
    if status == RolloutStatus.RUNNING:
        await store.heartbeat(r.rollout_id, c.attempt_id)
    elif status == RolloutStatus.REQUEUING:
        await store.update_attempt(r.rollout_id, c.attempt_id, status="failed")
    elif status != RolloutStatus.PREPARING:
        await store.update_rollout(r.rollout_id, status=status)
    assert (await store.get_rollout_by_id(r.rollout_id)).status == status
    return r.rollout_id


@pytest.mark.parametrize("source", list(RolloutStatus))
async def test_rollout_transition_table(store: LightningStore, source: RolloutStatus) -> None:
    from lightningstore.data.status import ROLLOUT_TRANSITIONS

    for target in RolloutStatus:
        if target == source:
            continue
        rollout_id = await _rollout_in(store, source)
        before = await store.get_rollout_by_id(rollout_id)
        if target in ROLLOUT_TRANSITIONS[source]:
            moved = await store.update_rollout(rollout_id, status=target)
            assert moved.status == target
        else:
            with pytest.raises(IllegalTransitionError):
                await store.update_rollout(rollout_id, status=target)
            assert await store.get_rollout_by_id(rollout_id) == before
        # drain anything the move requeued so the next iteration claims its own rollout
        while (c := await store.dequeue_rollout()) is not None:
            await store.update_rollout(c.rollout_id, status="cancelled")


async def test_cancel_ends_open_attempt(store: LightningStore) -> None:
    c = await store.start_rollout(1)
    r = await store.cancel_rollout(c.rollout_id)
    assert r.status == RolloutStatus.CANCELLED
    a = await store.get_latest_attempt(c.rollout_id)
    assert a.status == AttemptStatus.FAILED and "cancelled" in a.failure_reason
    assert (await store.cancel_rollout(c.rollout_id)).status == RolloutStatus.CANCELLED
    done = await store.start_rollout(2)
    await store.update_attempt(done.rollout_id, done.attempt_id, status="succeeded")
    with pytest.raises(IllegalTransitionError):
        await store.cancel_rollout(done.rollout_id)


async def test_update_rollout_fields_and_bad_input(store: LightningStore) -> None:
    r = await store.enqueue_rollout(1)
    up = await store.update_rollout(r.rollout_id, metadata={"a": 1}, config=RolloutConfig(max_attempts=3))
    assert up.metadata == {"a": 1} and up.config.max_attempts == 3 and up.status == RolloutStatus.QUEUING
    with pytest.raises(InvalidInputError, match="status"):
        await store.update_rollout(r.rollout_id, status="bogus")
    with pytest.raises(InvalidInputError, match="config"):
        await store.update_rollout(r.rollout_id, config={"max_attempts": -1})
    with pytest.raises(NotFoundError):
        await store.update_rollout(r.rollout_id, resources_id="rs-missing")
    with pytest.raises(NotFoundError):
        await store.update_rollout("missing", metadata={})
    assert (await store.get_rollout_by_id(r.rollout_id)) == up


async def test_wait_for_rollouts(store: LightningStore) -> None:
    a = await store.enqueue_rollout(1)
    b = await store.enqueue_rollout(2)
    assert await store.wait_for_rollouts([a.rollout_id, b.rollout_id], timeout=0) == []
    with pytest.raises(NotFoundError):
        await store.wait_for_rollouts(["missing"], timeout=0)
    with pytest.raises(InvalidInputError):
        await store.wait_for_rollouts([a.rollout_id], timeout=-1)

    async def finish_later() -> None:
        await asyncio.sleep(0.2)
        c = await store.dequeue_rollout()
        await store.update_attempt(c.rollout_id, c.attempt_id, status="succeeded")

    task = asyncio.create_task(finish_later())
    # b never finishes, so this waits the whole timeout: long enough for a busy machine to finish a.
    done = await store.wait_for_rollouts([a.rollout_id, b.rollout_id], timeout=3.0)
    await task
    assert [r.rollout_id for r in done] == [a.rollout_id]
    assert done[0].status == RolloutStatus.SUCCEEDED


async def test_an_integer_beyond_64_bits_is_refused_and_nothing_is_stored(store: LightningStore) -> None:
    with pytest.raises(InvalidInputError, match="64 bits"):
        await store.enqueue_rollout({"n": 2**70})
    assert await store.query_rollouts() == []
    edges = {"n": 2**64 - 1, "m": -(2**63)}  # the widest integers a stored JSON value keeps exactly
    stored = await store.enqueue_rollout(edges)
    got = await store.get_rollout_by_id(stored.rollout_id)
    assert got is not None and got.input == edges


NAN, INF = float("nan"), float("inf")


async def test_nan_and_infinity_are_refused_where_json_is_stored_and_nothing_changes(
    store: LightningStore,
) -> None:
    # JSON has no NaN or Infinity; the writers would store them as null, silently.
    for call, field, where in [
        (lambda: store.enqueue_rollout({"x": NAN}), "input", "at x"),
        (lambda: store.enqueue_rollout(1, metadata={"m": [1.0, -INF]}), "metadata", r"at m\[1\]"),
        (lambda: store.start_rollout([{"v": INF}]), "input", r"at \[0\]\.v"),
        (
            lambda: store.enqueue_many_rollouts([RolloutRequest(input=1), RolloutRequest(input=NAN)]),
            "input",
            "",
        ),
    ]:
        with pytest.raises(InvalidInputError, match=f"holds .*{where}") as caught:
            await call()
        assert caught.value.field == field
    assert await store.query_rollouts() == []

    kept = await store.enqueue_rollout(1, metadata={"ok": 1})
    with pytest.raises(InvalidInputError) as caught:
        await store.update_rollout(kept.rollout_id, metadata={"x": NAN})
    assert caught.value.field == "metadata"
    assert (await store.get_rollout_by_id(kept.rollout_id)).metadata == {"ok": 1}
    claimed = await store.dequeue_rollout("w1")
    with pytest.raises(InvalidInputError) as caught:
        await store.update_attempt(claimed.rollout_id, claimed.attempt_id, metadata={"score": INF})
    assert caught.value.field == "metadata"
    assert (await store.get_latest_attempt(claimed.rollout_id)).metadata == {}
    with pytest.raises(InvalidInputError) as caught:
        await store.update_worker("w1", metadata={"load": NAN})
    assert caught.value.field == "metadata"
    with pytest.raises(ValueError, match="finite"):
        RolloutConfig(timeout_seconds=INF)
