"""A learner step reads spans and rewards in batches: its store calls do not grow with the rollouts."""

from __future__ import annotations

import inspect
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from algorithm import Task
from lightningrl.release import stop_reason
from lightningrl.release.spans import KIND_ATTRIBUTES
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.loop import LightningRL
from lightningstore import LLM, RewardIn, Rollout, SpanIn, SqlStore, semconv
from lightningstore.gate import GatePolicy, ProtectedCase, gate_records

NAME = "llm"


class CountingStore:
    """A real SqlStore behind a thin wrapper that counts the calls made on it (by method) and keeps
    their keyword arguments and answers."""

    def __init__(self, inner: SqlStore) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.seen: dict[str, list[tuple[dict[str, Any], Any]]] = defaultdict(list)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name.startswith("_") or not inspect.iscoroutinefunction(attr):
            return attr

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            answer = await attr(*args, **kwargs)
            self.seen[name].append((kwargs, answer))
            return answer

        return counted


async def run_rollouts(store: SqlStore, rollouts: list[Rollout]) -> None:
    """What runners would record: a root span, one LLM call with token ids, a primary reward."""
    for i, rollout in enumerate(rollouts):
        claim = await store.start_attempt(rollout.rollout_id)
        rid, aid = rollout.rollout_id, claim.attempt_id
        llm_attributes = {
            semconv.GEN_AI_OPERATION: "chat",
            semconv.LLM_PROMPT_TOKEN_IDS: [1, 2, 3, 4],
            semconv.LLM_RESPONSE_TOKEN_IDS: [5, 6],
            semconv.LLM_RESPONSE_LOGPROBS: [-0.1, -0.2],
        }
        await store.add_many_spans(
            [
                SpanIn(
                    rollout_id=rid, attempt_id=aid, trace_id="t", span_id="root", name="lightningrl.rollout"
                ),
                SpanIn(
                    rollout_id=rid,
                    attempt_id=aid,
                    trace_id="t",
                    span_id="llm",
                    name="chat",
                    attributes=llm_attributes,
                ),
            ]
        )
        await store.add_reward(RewardIn(rollout_id=rid, attempt_id=aid, value=float(i % 2)))
        await store.update_attempt(rid, aid, status="succeeded")


async def one_step(tmp_path: Path, tasks_per_step: int, n: int) -> tuple[CountingStore, int]:
    """Enqueue, run, then wait + collect + the gate's stop check of one step, counting the store calls
    of the last three; returns the store and how many sequences were collected."""
    inner = SqlStore(tmp_path / f"{tasks_per_step}x{n}.db")
    store = CountingStore(inner)
    gate = gate_records(inner)
    root = await inner.add_resource_version(
        NAME, LLM(endpoints=["http://x"], model="m", checkpoint=str(tmp_path))
    )
    child = await inner.add_resource_version(NAME, root.resource, parent_id=root.version_id)
    await gate.put_protected_case(
        ProtectedCase(resource_name=NAME, case_id="case-t0", task_id="t0"), recorded_by="test"
    )
    tasks = [Task(task_id=f"t{i}", input={"i": i}) for i in range(tasks_per_step)]
    config = LightningRLConfig(output_dir=tmp_path / f"run-{tasks_per_step}x{n}", show_progress=False)
    rl = LightningRL(store, tasks, config=config)  # type: ignore[arg-type]  # a duck-typed store
    enqueued = await rl.enqueue_tasks(tasks, n=n)
    protected = []
    for version in (root, child):  # protected-case runs of each version, for the stop check's reward read
        bound = await inner.add_resource_set({NAME: version.version_id})
        protected += await rl.enqueue_tasks(tasks[:1], n=n, mode="test", resources_id=bound.resources_id)
    await run_rollouts(inner, [r for r, _ in enqueued + protected])

    store.calls.clear()
    outcomes = await rl.wait_for(enqueued, timeout=10)
    sequences, _, _ = await rl.collect(outcomes)
    policy = GatePolicy(resource_name=NAME, span_coverage=["agent", "llm"])
    assert await stop_reason(store, NAME, gate=gate, policy=policy) is None  # type: ignore[arg-type]
    await inner.close()
    return store, len(sequences)


async def test_a_step_makes_a_constant_number_of_store_calls(tmp_path: Path) -> None:
    small, small_sequences = await one_step(tmp_path, tasks_per_step=2, n=2)
    large, large_sequences = await one_step(tmp_path, tasks_per_step=6, n=4)
    assert (small_sequences, large_sequences) == (4, 24)  # every rollout's LLM call became a sequence
    assert large.calls == small.calls, (small.calls, large.calls)
    assert large.calls["query_spans"] == 0 and large.calls["query_rewards"] == 0
    # wait_for: one reward read; collect: one span read; stop check: one span read (coverage) and one
    # reward read per version of the protected comparison.
    assert large.calls["query_rewards_many"] == 3 and large.calls["query_spans_many"] == 2


async def test_the_stop_check_reads_span_names_without_token_ids(tmp_path: Path) -> None:
    store, _ = await one_step(tmp_path, tasks_per_step=2, n=3)
    (collect_read, coverage_read) = store.seen["query_spans_many"]
    kwargs, answer = coverage_read
    assert kwargs["attributes"] == KIND_ATTRIBUTES
    spans = [s for rollout_spans in answer.values() for s in rollout_spans]
    assert len(spans) == 2 * 2 * 3
    assert {s.name for s in spans} == {"lightningrl.rollout", "chat"}
    assert all(set(s.attributes) <= set(KIND_ATTRIBUTES) for s in spans)
    # The learner's own read keeps the token ids it trains on.
    _, full = collect_read
    llm = [s for rollout_spans in full.values() for s in rollout_spans if s.name == "chat"]
    assert llm and all(semconv.LLM_PROMPT_TOKEN_IDS in s.attributes for s in llm)
