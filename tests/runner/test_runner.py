"""Runner end to end against an in-process SqlStore: agents, rewards, spans, failures, timeouts, stop."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from lightningstore import (
    LLM,
    AttemptStatus,
    InvalidInputError,
    PromptTemplate,
    RolloutConfig,
    RolloutStatus,
    SqlStore,
)
from lightningstore.auth import verify_agent_key
from lightningstore.semconv import (
    AGENT_NAME,
    ATTEMPT_ID,
    REWARD_NAME,
    REWARD_SPAN_NAME,
    REWARD_VALUE,
    ROLLOUT_ID,
)
from runner import AgentResources, LitAgent, Runner, agent_name, emit_reward, rollout, trace

FAST = {"workers": 2, "heartbeat_interval": 0.2, "poll_interval": 0.02, "show_progress": False}


def make_runner(store: SqlStore, agent: Any, **overrides: Any) -> Runner:
    return Runner(store, agent, **{**FAST, **overrides})


@trace(kind="tool")
def add(a: int, b: int) -> int:
    return a + b


@trace(name="think")
async def think(text: str) -> str:
    await asyncio.sleep(0)
    return text.upper()


@rollout
def sync_agent(task: dict[str, int], resources: AgentResources) -> float:
    total = add(task["a"], task["b"])
    return 1.0 if total == task["want"] else 0.0


@rollout(name="solver")
async def async_agent(task: dict[str, int], resources: AgentResources) -> dict[str, float]:
    await think("hello")
    emit_reward(0.25, name="format", step=0)
    return {"accuracy": float(task["a"] + task["b"] == task["want"]), "length": 3.0}


async def test_sync_and_async_agents_write_rewards_and_spans(sql_store: SqlStore) -> None:
    good = await sql_store.enqueue_rollout({"a": 1, "b": 2, "want": 3})
    bad = await sql_store.enqueue_rollout({"a": 1, "b": 2, "want": 4})
    summary = await make_runner(sql_store, sync_agent).run(max_rollouts=2)
    assert (summary.claimed, summary.succeeded, summary.failed) == (2, 2, 0)

    for rollout_id, value in ((good.rollout_id, 1.0), (bad.rollout_id, 0.0)):
        stored = await sql_store.get_rollout_by_id(rollout_id)
        assert stored is not None and stored.status == RolloutStatus.SUCCEEDED
        (reward,) = await sql_store.query_rewards(rollout_id)
        assert (reward.name, reward.value, reward.primary) == ("reward", value, True)
        spans = await sql_store.query_spans(rollout_id)
        names = [s.name for s in spans]
        assert sorted(names) == ["lightningrl.reward", "lightningrl.rollout", "tool.add"]
        attempt = (await sql_store.query_attempts(rollout_id))[0]
        for span in spans:
            assert span.attempt_id == attempt.attempt_id
            assert (
                span.attributes[ROLLOUT_ID] == rollout_id
                and span.attributes[ATTEMPT_ID] == attempt.attempt_id
            )
            assert span.resource[ROLLOUT_ID] == rollout_id and span.resource[ATTEMPT_ID] == attempt.attempt_id
        root = next(s for s in spans if s.name == "lightningrl.rollout")
        tool = next(s for s in spans if s.name == "tool.add")
        assert tool.parent_id == root.span_id and tool.trace_id == root.trace_id
        assert tool.attributes["lightningrl.trace.arguments"] == '{"a": 1, "b": 2}'
        assert tool.attributes["lightningrl.trace.result"] == "3"

    await sql_store.enqueue_rollout({"a": 2, "b": 2, "want": 4}, rollout_id="async-1")
    summary = await make_runner(sql_store, async_agent).run(max_rollouts=1)
    assert summary.succeeded == 1
    rewards = {r.name: (r.value, r.primary, r.step) for r in await sql_store.query_rewards("async-1")}
    assert rewards == {
        "format": (0.25, False, 0),
        "accuracy": (1.0, True, None),
        "length": (3.0, False, None),
    }
    spans = await sql_store.query_spans("async-1")
    assert {s.attributes[AGENT_NAME] for s in spans} == {"solver"}
    reward_spans = [s for s in spans if s.name == REWARD_SPAN_NAME]
    assert sorted((s.attributes[REWARD_NAME], s.attributes[REWARD_VALUE]) for s in reward_spans) == [
        ("accuracy", 1.0),
        ("format", 0.25),
        ("length", 3.0),
    ]
    assert any(
        s.name == "step.think" and s.attributes["lightningrl.trace.result"] == '"HELLO"' for s in spans
    )


class Crashing(LitAgent):
    name = "crasher"

    def rollout(self, task: Any, resources: AgentResources) -> float:
        if task == "boom":
            raise ValueError("the tool broke on purpose")
        return 1.0


async def test_exception_fails_the_attempt_with_traceback_and_runner_goes_on(sql_store: SqlStore) -> None:
    boom = await sql_store.enqueue_rollout("boom")
    fine = await sql_store.enqueue_rollout("fine")
    summary = await make_runner(sql_store, Crashing(), workers=1).run(max_rollouts=2)
    assert (summary.claimed, summary.failed, summary.succeeded) == (2, 1, 1)

    (attempt,) = await sql_store.query_attempts(boom.rollout_id)
    assert attempt.status == AttemptStatus.FAILED
    assert attempt.failure_reason is not None
    assert "Traceback (most recent call last)" in attempt.failure_reason
    assert "ValueError: the tool broke on purpose" in attempt.failure_reason
    assert "in rollout" in attempt.failure_reason
    stored = await sql_store.get_rollout_by_id(boom.rollout_id)
    assert stored is not None and stored.status == RolloutStatus.FAILED
    (root,) = await sql_store.query_spans(boom.rollout_id, name="lightningrl.rollout")
    assert root.status.status_code == "ERROR" and "ValueError" in (root.status.description or "")
    (event,) = [e for e in root.events if e.name == "exception"]
    assert event.attributes["exception.type"] == "ValueError"
    assert "the tool broke on purpose" in event.attributes["exception.stacktrace"]
    assert root.attributes[AGENT_NAME] == "crasher"

    fine_rollout = await sql_store.get_rollout_by_id(fine.rollout_id)
    assert fine_rollout is not None and fine_rollout.status == RolloutStatus.SUCCEEDED


async def test_bad_return_value_fails_the_attempt(sql_store: SqlStore) -> None:
    await sql_store.enqueue_rollout("x", rollout_id="bad-return")
    summary = await make_runner(sql_store, lambda task, resources: "not a reward").run(max_rollouts=1)
    assert summary.failed == 1
    (attempt,) = await sql_store.query_attempts("bad-return")
    assert "TypeError" in (attempt.failure_reason or "") and "'not a reward'" in (
        attempt.failure_reason or ""
    )


@rollout
async def hanging_async(task: str, resources: AgentResources) -> float:
    if task == "hang":
        await asyncio.sleep(60)
    return 1.0


@rollout
def hanging_sync(task: str, resources: AgentResources) -> float:
    if task == "hang":
        time.sleep(10)  # bounded: the abandoned (daemon) thread ends on its own
    return 1.0


async def test_hanging_agents_time_out_and_the_runner_moves_on(sql_store: SqlStore) -> None:
    config = RolloutConfig(timeout_seconds=0.5)
    for agent in (hanging_async, hanging_sync):
        hang = await sql_store.enqueue_rollout("hang", config=config)
        after = await sql_store.enqueue_rollout("after", config=config)
        started = time.monotonic()
        summary = await make_runner(sql_store, agent, workers=1).run(max_rollouts=2)
        # The runner moved on without waiting for the hung agent (10 s); the margin absorbs a busy machine.
        assert time.monotonic() - started < 8
        assert (summary.timed_out, summary.succeeded) == (1, 1)
        (attempt,) = await sql_store.query_attempts(hang.rollout_id)
        assert attempt.status == AttemptStatus.TIMEOUT and "timeout of 0.5s" in (attempt.failure_reason or "")
        (root,) = await sql_store.query_spans(hang.rollout_id, name="lightningrl.rollout")
        assert root.status.status_code == "ERROR" and root.events[0].attributes["reason"] == "timeout"
        done = await sql_store.get_rollout_by_id(after.rollout_id)
        assert done is not None and done.status == RolloutStatus.SUCCEEDED


@rollout
async def tagged(task: int, resources: AgentResources) -> float:
    with agent_name(f"agent-{task}"):
        for step in range(3):
            await asyncio.sleep(0.01)
            emit_reward(float(task), name="step", step=step)
    return float(task)


async def test_concurrent_rollouts_never_mix_spans(sql_store: SqlStore) -> None:
    rollouts = [await sql_store.enqueue_rollout(i) for i in range(8)]
    summary = await make_runner(sql_store, tagged, workers=4).run(max_rollouts=8)
    assert summary.succeeded == 8
    for index, item in enumerate(rollouts):
        spans = await sql_store.query_spans(item.rollout_id)
        (attempt,) = await sql_store.query_attempts(item.rollout_id)
        assert len(spans) == 5  # root, 3 step rewards, final reward
        assert {s.attempt_id for s in spans} == {attempt.attempt_id}
        assert {s.attributes[ROLLOUT_ID] for s in spans} == {item.rollout_id}
        steps = [s for s in spans if s.attributes.get(REWARD_NAME) == "step"]
        assert {s.attributes[AGENT_NAME] for s in steps} == {f"agent-{index}"}
        assert {s.attributes[REWARD_VALUE] for s in steps} == {float(index)}
        assert len({s.trace_id for s in spans}) == 1


async def test_resources_training_production_proxy_and_agent_key(sql_store: SqlStore) -> None:
    llm = LLM(endpoints=["http://model-a:8000/v1"], model="tiny", sampling={"temperature": 0.7})
    first = await sql_store.add_resources({"policy": llm, "prompt": PromptTemplate(template="Q: {q}")})
    newer = await sql_store.add_resources(
        {"policy": llm.model_copy(update={"endpoints": ["http://model-b:8000/v1"]})},
        parents={"policy": first.versions["policy"].version_id},
    )
    seen: dict[str, AgentResources] = {}

    @rollout
    def capture(task: str, resources: AgentResources) -> None:
        seen[task] = resources

    await sql_store.enqueue_rollout("train", resources_id=newer.resources_id)
    await sql_store.enqueue_rollout("val", resources_id=newer.resources_id, mode="val")
    proxy = "http://127.0.0.1:4747/proxy"
    runner = make_runner(sql_store, capture, workers=1, proxy_url=proxy, agent_key_secret="s3cret")
    assert (await runner.run(max_rollouts=2)).succeeded == 2

    train = seen["train"]
    assert (
        train.llm.base_url == f"{proxy}/rollout/{train.rollout_id}/attempt/{train.attempt_id}/mode/train/v1"
    )
    assert train.llm.version_id == newer.versions["policy"].version_id and train.llm.model == "tiny"
    assert verify_agent_key("s3cret", train.llm.api_key) == (train.rollout_id, train.attempt_id)
    # What the proxy sends: train samples the model's own distribution, val at 0.7 (`MODE_SAMPLING`).
    assert train.llm.sampling == {"temperature": 1.0, "top_p": 1.0}
    assert seen["val"].llm.sampling == {"temperature": 0.7} and "/mode/val/v1" in seen["val"].llm.base_url

    # Production follows the gate: a rollout without a set gets the approved version (the first); one
    # bound to the newer candidate is refused, not run on another version than the one it names.
    once = RolloutConfig(max_attempts=1)
    await sql_store.enqueue_rollout("bound", resources_id=newer.resources_id, rollout_id="bound", config=once)
    await sql_store.enqueue_rollout("prod")
    summary = await make_runner(sql_store, capture, production=True).run(max_rollouts=2)
    assert (summary.succeeded, summary.failed) == (1, 1) and "bound" not in seen
    (refused,) = await sql_store.query_attempts("bound")
    newer_id, first_id = newer.versions["policy"].version_id, first.versions["policy"].version_id
    reason = str(refused.failure_reason)
    assert f"'policy' version {newer_id}, but its approved version is {first_id}" in reason
    prod = seen["prod"]
    assert prod.llm.version_id == first.versions["policy"].version_id
    assert prod.llm.base_url == "http://model-a:8000/v1" and prod.llm.api_key == "lightningrl"

    await sql_store.enqueue_rollout("both", resources_id=first.resources_id)
    assert (await make_runner(sql_store, capture).run(max_rollouts=1)).succeeded == 1
    both = seen["both"]
    assert both.prompts["prompt"].format(q="2+2") == "Q: 2+2"
    assert both.llms["policy"].base_url == "http://model-a:8000/v1"


async def test_several_llms_make_resources_llm_name_the_choices(sql_store: SqlStore) -> None:
    a = LLM(endpoints=["http://a/v1"], model="a")
    bound = await sql_store.add_resources({"planner": a, "coder": a.model_copy(update={"model": "b"})})
    await sql_store.enqueue_rollout("x", resources_id=bound.resources_id, rollout_id="two-llms")

    @rollout
    def use_llm(task: str, resources: AgentResources) -> None:
        resources.llm  # noqa: B018 - the property raises

    assert (await make_runner(sql_store, use_llm).run(max_rollouts=1)).failed == 1
    (attempt,) = await sql_store.query_attempts("two-llms")
    assert "['coder', 'planner']" in (attempt.failure_reason or "")


async def test_stop_lets_in_flight_finish_then_force_marks_runner_stopped(sql_store: SqlStore) -> None:
    started = asyncio.Event()

    @rollout
    async def slow(task: float, resources: AgentResources) -> float:
        started.set()
        await asyncio.sleep(task)
        return 1.0

    quick = await sql_store.enqueue_rollout(0.3)
    waiting = await sql_store.enqueue_rollout(0.0)
    runner = make_runner(sql_store, slow, workers=1)
    task = asyncio.create_task(runner.run())
    await asyncio.wait_for(started.wait(), 5)
    runner.stop()
    summary = await asyncio.wait_for(task, 5)
    assert (summary.claimed, summary.succeeded) == (1, 1)
    done = await sql_store.get_rollout_by_id(quick.rollout_id)
    assert done is not None and done.status == RolloutStatus.SUCCEEDED
    untouched = await sql_store.get_rollout_by_id(waiting.rollout_id)
    assert untouched is not None and untouched.status == RolloutStatus.QUEUING

    await sql_store.cancel_rollout(waiting.rollout_id)
    long = await sql_store.enqueue_rollout(30.0)
    started.clear()
    runner = make_runner(sql_store, slow, workers=1)
    task = asyncio.create_task(runner.run())
    await asyncio.wait_for(started.wait(), 5)
    runner.stop()
    runner.stop()  # asked twice: cancel in-flight attempts now
    summary = await asyncio.wait_for(task, 5)
    assert summary.failed == 1
    (attempt,) = await sql_store.query_attempts(long.rollout_id)
    assert attempt.status == AttemptStatus.FAILED and attempt.failure_reason == "runner stopped"


async def test_idle_timeout_and_watchdog_ending_an_attempt(sql_store: SqlStore) -> None:
    started = time.monotonic()
    summary = await make_runner(sql_store, sync_agent).run(idle_timeout=0.3)
    assert summary.claimed == 0 and time.monotonic() - started < 10  # idle_timeout=0.3, not forever

    agent_started = asyncio.Event()
    cancelled = asyncio.Event()

    @rollout
    async def waits(task: str, resources: AgentResources) -> float:
        agent_started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 1.0

    item = await sql_store.enqueue_rollout("x")
    runner = make_runner(sql_store, waits, workers=1, heartbeat_interval=0.05)
    task = asyncio.create_task(runner.run(max_rollouts=1))
    # Cancel only once the agent runs: cancelling while the attempt is still preparing is the next test.
    await asyncio.wait_for(agent_started.wait(), 10)
    await sql_store.cancel_rollout(item.rollout_id)
    summary = await asyncio.wait_for(task, 5)
    assert cancelled.is_set() and summary.ended_elsewhere == 1
    stored = await sql_store.get_rollout_by_id(item.rollout_id)
    assert stored is not None and stored.status == RolloutStatus.CANCELLED


class CancelsOnClaim:
    """A real SqlStore whose rollouts are cancelled the moment a runner claims them (before the agent)."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def dequeue_rollout(self, *args: Any, **kwargs: Any) -> Any:
        claimed = await self._store.dequeue_rollout(*args, **kwargs)
        if claimed is not None:
            await self._store.cancel_rollout(claimed.rollout_id)
        return claimed


async def test_rollout_cancelled_before_its_agent_starts(sql_store: SqlStore) -> None:
    ran = asyncio.Event()

    @rollout
    async def never(task: str, resources: AgentResources) -> float:
        ran.set()
        return 1.0

    item = await sql_store.enqueue_rollout("x")
    runner = make_runner(CancelsOnClaim(sql_store), never, workers=1)  # type: ignore[arg-type]
    summary = await asyncio.wait_for(runner.run(max_rollouts=1), 10)
    assert summary.claimed == 1 and summary.ended_elsewhere == 1 and summary.succeeded == 0
    assert not ran.is_set()
    stored = await sql_store.get_rollout_by_id(item.rollout_id)
    assert stored is not None and stored.status == RolloutStatus.CANCELLED
    (attempt,) = await sql_store.query_attempts(item.rollout_id)
    assert attempt.status != AttemptStatus.SUCCEEDED


async def test_progress_display_renders_counts(sql_store: SqlStore) -> None:
    from rich.console import Console

    from runner.progress import ProgressDisplay, RunnerSummary

    await sql_store.enqueue_rollout({"a": 1, "b": 1, "want": 2})
    summary = await make_runner(sql_store, sync_agent, show_progress=True).run(max_rollouts=1)
    assert summary.succeeded == 1
    console = Console(record=True, width=100)
    console.print(
        ProgressDisplay(RunnerSummary(claimed=3, running=1, succeeded=1, failed=1), enabled=False).render()
    )
    text = console.export_text()
    assert "claimed" in text and "running" in text and "finished" in text and "failed" in text
    assert "3" in text and "2" in text


async def test_a_second_parameter_named_llm_gets_the_rollouts_llm(sql_store: SqlStore) -> None:
    seen: dict[str, Any] = {}

    @rollout
    def agent(task: str, llm: Any) -> float:
        seen["llm"] = llm
        return 1.0

    bound = await sql_store.add_resources({"llm": LLM(endpoints=["http://model/v1"], model="tiny")})
    await sql_store.enqueue_rollout("x", resources_id=bound.resources_id)
    summary = await make_runner(sql_store, agent, proxy_url="http://store/proxy").run(max_rollouts=1)
    assert summary.succeeded == 1
    llm = seen["llm"]
    assert llm.model == "tiny" and llm.base_url.startswith("http://store/proxy/rollout/")


class RefusesFinish:
    """A real SqlStore that refuses `finish_attempt` as a server would refuse a span it cannot store."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        self.finishes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def finish_attempt(self, *args: Any, **kwargs: Any) -> Any:
        self.finishes += 1
        raise InvalidInputError("spans", "an attribute value the server cannot store")


async def test_attempt_whose_telemetry_cannot_be_stored_fails_and_says_why(sql_store: SqlStore) -> None:
    @rollout
    async def fine(task: str, resources: AgentResources) -> float:
        return 1.0

    item = await sql_store.enqueue_rollout("x")
    refusing = RefusesFinish(sql_store)
    runner = make_runner(refusing, fine, workers=1)  # type: ignore[arg-type]
    summary = await asyncio.wait_for(runner.run(max_rollouts=1), 10)
    assert summary.failed == 1 and summary.succeeded == 0
    assert refusing.finishes == 1  # a refused request is not sent again
    attempt = await sql_store.get_latest_attempt(item.rollout_id)
    assert attempt is not None and attempt.status == AttemptStatus.FAILED
    assert attempt.failure_reason is not None
    assert attempt.failure_reason.startswith("spans or rewards could not be stored: InvalidInputError")
