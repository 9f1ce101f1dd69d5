"""Contract: batch reads of spans and rewards (`query_spans_many`, `query_rewards_many`) on every backend."""

from __future__ import annotations

import pytest

from lightningstore import (
    MAX_READ_IDS,
    InvalidInputError,
    LightningStore,
    RewardIn,
    RolloutConfig,
    SpanIn,
    rewards_of_rollouts,
    spans_of_rollouts,
)
from lightningstore.store import MAX_READ_ATTRIBUTES


def span(rollout_id: str, attempt_id: str, span_id: str, **kw) -> SpanIn:
    return SpanIn(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        trace_id="t1",
        span_id=span_id,
        name=kw.pop("name", "step"),
        **kw,
    )


def span_ids(by_rollout: dict) -> dict[str, list[str]]:
    return {rollout_id: [s.span_id for s in spans] for rollout_id, spans in by_rollout.items()}


async def test_spans_many_match_the_single_reads(store: LightningStore) -> None:
    a = await store.start_rollout(1)
    b = await store.start_rollout(2)
    empty = await store.start_rollout(3)
    # Interleaved writes: each rollout's list must still come out in its own sequence order.
    await store.add_many_spans(
        [span(a.rollout_id, a.attempt_id, "a1"), span(b.rollout_id, b.attempt_id, "b1")]
    )
    await store.add_many_spans(
        [span(b.rollout_id, b.attempt_id, "b2"), span(a.rollout_id, a.attempt_id, "a2")]
    )
    asked = [b.rollout_id, "ro-missing", a.rollout_id, empty.rollout_id, b.rollout_id]
    got = await store.query_spans_many(asked)
    assert list(got) == [b.rollout_id, "ro-missing", a.rollout_id, empty.rollout_id]  # first-asked order
    assert span_ids(got) == {
        b.rollout_id: ["b1", "b2"],
        "ro-missing": [],
        a.rollout_id: ["a1", "a2"],
        empty.rollout_id: [],
    }
    for rollout_id in (a.rollout_id, b.rollout_id):
        assert got[rollout_id] == await store.query_spans(rollout_id, "latest")
    assert await store.query_spans_many([]) == {}


async def test_spans_many_attempt_latest_or_every(store: LightningStore) -> None:
    r = await store.enqueue_rollout(1, config=RolloutConfig(max_attempts=2, retry_on=["failed"]))
    waiting = await store.enqueue_rollout(2)
    first = await store.dequeue_rollout()
    await store.add_span(span(r.rollout_id, first.attempt_id, "x1"))
    await store.update_attempt(r.rollout_id, first.attempt_id, status="failed")
    await store.update_rollout(waiting.rollout_id, status="cancelled")
    second = await store.dequeue_rollout()
    assert second.rollout_id == r.rollout_id
    await store.add_span(span(r.rollout_id, second.attempt_id, "x2"))
    latest = await store.query_spans_many([r.rollout_id, waiting.rollout_id])
    assert span_ids(latest) == {r.rollout_id: ["x2"], waiting.rollout_id: []}  # no attempt: []
    every = await store.query_spans_many([r.rollout_id], None)
    assert span_ids(every) == {r.rollout_id: ["x1", "x2"]}
    assert every[r.rollout_id] == await store.query_spans(r.rollout_id)


async def test_spans_many_projection_leaves_out_other_attributes(store: LightningStore) -> None:
    c = await store.start_rollout(1)
    tokens = {"prompt_token_ids": list(range(50)), "logprobs": [-0.5] * 50}
    await store.add_many_spans(
        [
            span(
                c.rollout_id,
                c.attempt_id,
                "llm",
                name="chat",
                attributes={"gen_ai.operation.name": "chat", **tokens},
            ),
            span(
                c.rollout_id, c.attempt_id, "tool", name="tool.search", attributes={"n": 3, "x": {"y": [1]}}
            ),
        ]
    )
    full = (await store.query_spans_many([c.rollout_id]))[c.rollout_id]
    (projected,) = (
        await store.query_spans_many([c.rollout_id], attributes=["gen_ai.operation.name", "x"])
    ).values()
    assert [s.attributes for s in projected] == [{"gen_ai.operation.name": "chat"}, {"x": {"y": [1]}}]
    # Everything but the attributes is the full span.
    assert [s.model_copy(update={"attributes": {}}) for s in full] == [
        s.model_copy(update={"attributes": {}}) for s in projected
    ]
    (names_only,) = (await store.query_spans_many([c.rollout_id], attributes=[])).values()
    assert [(s.name, s.attributes) for s in names_only] == [("chat", {}), ("tool.search", {})]


async def test_rewards_many_in_added_order(store: LightningStore) -> None:
    a = await store.start_rollout(1)
    b = await store.start_rollout(2)
    await store.add_reward(RewardIn(rollout_id=a.rollout_id, name="reward", value=0.1))
    await store.add_reward(RewardIn(rollout_id=b.rollout_id, name="reward", value=0.2))
    await store.add_reward(RewardIn(rollout_id=a.rollout_id, name="judge", value=0.3, primary=False))
    got = await store.query_rewards_many([a.rollout_id, "ro-missing", b.rollout_id, a.rollout_id])
    assert list(got) == [a.rollout_id, "ro-missing", b.rollout_id]
    assert {k: [(r.name, r.value) for r in v] for k, v in got.items()} == {
        a.rollout_id: [("reward", 0.1), ("judge", 0.3)],
        "ro-missing": [],
        b.rollout_id: [("reward", 0.2)],
    }
    assert got[a.rollout_id] == await store.query_rewards(a.rollout_id)
    assert await store.query_rewards_many([]) == {}


async def test_batch_reads_refuse_bad_input(store: LightningStore) -> None:
    too_many = [f"ro-{i}" for i in range(MAX_READ_IDS + 1)]
    for read in (store.query_spans_many, store.query_rewards_many):
        with pytest.raises(
            InvalidInputError, match=f"at most {MAX_READ_IDS} ids per call, got {MAX_READ_IDS + 1}"
        ) as e:
            await read(too_many)
        assert e.value.field == "rollout_ids"
        with pytest.raises(InvalidInputError, match="rollout_ids.*got str 'ro-1'"):
            await read("ro-1")  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="rollout_ids.*ids must be strings, got int 7"):
            await read(["ro-1", 7])  # type: ignore[list-item]
    # The limit counts the ids given: exactly MAX_READ_IDS (duplicates included) is fine.
    assert len(await store.query_rewards_many(["ro-dup"] * MAX_READ_IDS)) == 1
    with pytest.raises(InvalidInputError, match="attempt.*'at-1'") as e:
        await store.query_spans_many(["ro-1"], "at-1")  # type: ignore[arg-type]
    assert e.value.field == "attempt"
    for bad in (
        "gen_ai",
        ['a"b'],
        ["a\\b"],
        ["a\nb"],
        [""],
        [f"k{i}" for i in range(MAX_READ_ATTRIBUTES + 1)],
    ):
        with pytest.raises(InvalidInputError, match="attributes") as e:
            await store.query_spans_many(["ro-1"], attributes=bad)
        assert e.value.field == "attributes"


async def test_reads_of_any_size_chunk_by_the_limit(store: LightningStore) -> None:
    c = await store.start_rollout(1)
    await store.add_span(span(c.rollout_id, c.attempt_id, "s1"))
    await store.add_reward(RewardIn(rollout_id=c.rollout_id, name="reward", value=1.0))
    ids = [f"ro-none-{i}" for i in range(MAX_READ_IDS + 5)] + [c.rollout_id]
    spans = await spans_of_rollouts(store, ids)
    rewards = await rewards_of_rollouts(store, ids)
    assert list(spans) == ids and list(rewards) == ids
    assert [s.span_id for s in spans[c.rollout_id]] == ["s1"]
    assert [r.value for r in rewards[c.rollout_id]] == [1.0]
