"""The parts of continuous learning on their own: the group-free baseline, the incremental feed, freshness."""

from __future__ import annotations

from pathlib import Path

import pytest

from lightningrl.credit import TrainingSequence, collate
from lightningrl.rl.advantages import AdvantageConfig, compute_advantages
from lightningrl.rl.baseline import RunningBaseline
from lightningrl.rl.continuous import (
    ContinuousConfig,
    RolloutFeed,
    VersionLineage,
    sampling_versions,
    task_key,
)
from lightningstore import LLM, AttemptStatus, SpanIn, SqlStore, semconv


def one_call(rollout: str, task: str, value: float) -> TrainingSequence:
    return TrainingSequence(
        rollout_id=rollout,
        prompt_ids=[1, 2],
        response_ids=[5, 6],
        response_mask=[1, 1],
        rollout_logprobs=[0.0, 0.0],
        token_rewards=[0.0, value],
        call_ids=[0, 0],
        call_values={0: value},
        sequence_reward=value,
        group_id=task,
    )


def test_running_baseline_learns_from_one_rollout_per_task_where_grpo_drops_everything() -> None:
    first = collate([one_call("r1", "t1", 1.0), one_call("r2", "t2", 0.0), one_call("r3", "t1", 0.0)])
    baseline = RunningBaseline.named("running_task", decay=0.5, normalize=False)
    result = baseline.advantages(first)
    # The very first batch is compared with its own mean (1/3).
    assert result.keep.tolist() == [True, True, True]
    assert result.advantages[0, 1].item() == pytest.approx(2 / 3)
    assert result.advantages[1, 1].item() == pytest.approx(-1 / 3)
    assert baseline.means == {"t1": 0.5, "t2": 0.0}
    # Next step: one rollout per task; each is compared with its task's running mean, a new task with
    # the global one.
    second = collate([one_call("r4", "t1", 1.0), one_call("r5", "t2", 0.0), one_call("r6", "t3", 1.0)])
    assert not bool(compute_advantages(second).keep.any())  # GRPO: three one-rollout groups, all dropped
    result = baseline.advantages(second, AdvantageConfig(scale_to_batch=False))
    assert result.keep.tolist() == [True, False, True]  # t2 scored as expected: no signal
    assert result.advantages[0, 0].item() == pytest.approx(0.5)
    assert result.advantages[2, 1].item() == pytest.approx(1 - 1 / 3)
    scaled = RunningBaseline(decay=0.5, normalize=False, means={"t1": 0.5, "t2": 0.0}, global_mean=1 / 3)
    # by default the kept calls carry the batch's whole step (2 of 3 calls kept)
    assert scaled.advantages(second).advantages[0, 0].item() == pytest.approx(0.5 * 2 / 3)
    assert result.dropped_groups == 1 and result.groups == 3


def test_running_baseline_normalises_and_global_ignores_tasks() -> None:
    batch = collate([one_call("r1", "t1", 3.0), one_call("r2", "t2", 1.0)])
    baseline = RunningBaseline.named("running_global")
    result = baseline.advantages(batch)
    # mean 2, advantages +1 and -1, std sqrt(2): whitened to +-1/sqrt(2)
    assert result.advantages[0, 1].item() == pytest.approx(2**-0.5, rel=1e-4)
    assert result.advantages[1, 1].item() == pytest.approx(-(2**-0.5), rel=1e-4)
    assert baseline.state()["kind"] == "running_global" and baseline.means == {"all": 2.0}
    with pytest.raises(ValueError, match="running_task"):
        RunningBaseline.named("group")
    with pytest.raises(ValueError, match="max_staleness"):
        ContinuousConfig(max_staleness=-1)
    with pytest.raises(ValueError, match="continuous baseline"):
        ContinuousConfig(baseline="ppo")


async def finish(store: SqlStore, count: int, prefix: str) -> list[str]:
    ids = []
    for i in range(count):
        rollout = await store.enqueue_rollout({"q": f"{prefix}{i}"}, rollout_id=f"{prefix}{i}")
        claimed = await store.dequeue_rollout()
        assert claimed is not None and claimed.rollout_id == rollout.rollout_id
        await store.update_attempt(claimed.rollout_id, claimed.attempt_id, status=AttemptStatus.SUCCEEDED)
        ids.append(rollout.rollout_id)
    return ids


async def test_feed_reads_only_what_is_new(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    old = await finish(store, 20, "old")
    feed = RolloutFeed(store, ContinuousConfig(page_size=4, lookback_seconds=0.0))
    first = await feed.poll()
    assert [r.rollout_id for r in first] == old and feed.reads == 6  # the first poll reads back to the start
    assert await feed.poll() == [] and feed.reads == 7  # nothing new: one read
    new = await finish(store, 3, "new")
    again = await feed.poll()
    assert [r.rollout_id for r in again] == new
    # the page reaching the cursor ends the poll (a second one when a rollout finished exactly at it):
    # the 20 old rollouts (5 pages) are not read again
    assert feed.reads - 7 <= 2
    cutoff = again[-1].end_time
    assert feed.cursor == cutoff
    # A restarted loop resumes from the cutoff its last version recorded.
    resumed = RolloutFeed(store, ContinuousConfig(page_size=4, lookback_seconds=0.0), cursor=cutoff)
    assert [r.rollout_id for r in await resumed.poll()] == new[-1:]  # at the cutoff: the loop's marks skip it
    await store.close()


async def test_staleness_follows_the_parent_chain(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    llm = LLM(endpoints=["http://127.0.0.1:9/v1"], model="m")
    chain = [await store.add_resource_version("llm", llm)]
    for _ in range(3):
        chain.append(await store.add_resource_version("llm", llm, parent_id=chain[-1].version_id))
    other = await store.add_resource_version("judge", llm)
    sibling = await store.add_resource_version("llm", llm, parent_id=chain[0].version_id)
    lineage = VersionLineage(store)
    v0, v1, v2, v3 = (v.version_id for v in chain)
    current = chain[-1]
    assert await lineage.staleness(current, {v3}, 1) == 0
    assert await lineage.staleness(current, {v2}, 1) == 1
    assert await lineage.staleness(current, {v1}, 1) == 2  # beyond the limit: limit + 1
    assert await lineage.staleness(current, {v0, v3}, 1) == 2  # the oldest call decides
    assert await lineage.staleness(current, {sibling.version_id}, 3) == 4  # off the lineage
    assert await lineage.staleness(current, {other.version_id}, 1) is None  # another resource's call
    assert await lineage.staleness(current, set(), 1) is None

    rollout = await store.enqueue_rollout({"q": 1}, rollout_id="r")
    claimed = await store.dequeue_rollout()
    base = {"rollout_id": "r", "attempt_id": claimed.attempt_id, "trace_id": "0" * 31 + "1"}
    await store.add_many_spans(
        [
            SpanIn(
                **base, span_id="0" * 15 + "1", name="chat", attributes={semconv.LLM_RESOURCE_VERSION: v2}
            ),
            SpanIn(
                **base, span_id="0" * 15 + "2", name="tool.x", attributes={semconv.LLM_RESOURCE_VERSION: v0}
            ),
        ]
    )
    assert sampling_versions(await store.query_spans("r")) == {v2}  # only LLM calls say who sampled
    assert task_key(rollout) == task_key(rollout.model_copy(update={"rollout_id": "other"}))
    assert task_key(rollout.model_copy(update={"group_id": "g"})) == "g"
    await store.close()


async def test_freshness_skips_stale_and_unversioned_rollouts(tmp_path: Path) -> None:
    from algorithm import Task
    from lightningrl.rl.config import LightningRLConfig
    from lightningrl.rl.loop import LightningRL

    store = SqlStore(tmp_path / "store.db")
    llm = LLM(endpoints=["http://127.0.0.1:9/v1"], model="m")
    v0 = await store.add_resource_version("llm", llm)
    v1 = await store.add_resource_version("llm", llm, parent_id=v0.version_id)
    v2 = await store.add_resource_version("llm", llm, parent_id=v1.version_id)
    config = LightningRLConfig(output_dir=tmp_path / "run", continuous=ContinuousConfig(max_staleness=1))
    rl = LightningRL(store, [Task(task_id="t", input={})], config=config)
    rl.version = v2
    rollouts = {}
    for label, version in (("old", v0), ("prev", v1), ("now", v2)):
        bound = await store.add_resource_set({"llm": version.version_id})
        rollouts[label] = await store.enqueue_rollout({"q": label}, resources_id=bound.resources_id)
    rollouts["nobody"] = await store.enqueue_rollout({"q": "nobody"})  # no resource set, no LLM call
    fresh, skipped = await rl.lineage.split_fresh(
        v2, list(rollouts.values()), {}, config.continuous.max_staleness
    )
    assert [r.rollout_id for r in fresh] == [rollouts["prev"].rollout_id, rollouts["now"].rollout_id]
    assert skipped == {rollouts["old"].rollout_id: "stale", rollouts["nobody"].rollout_id: "unversioned"}
    await store.close()
