"""Spans an agent's own instrumentation records on the global TracerProvider reach the attempt they ran in.

The libraries here do not know about the runner: `opentelemetry-instrumentation-httpx` instruments
httpx through the global provider, and the agent's own code calls `opentelemetry.trace.get_tracer`.
Two attempts run concurrently (asyncio tasks, then agent threads); each gets exactly its own spans,
under the attempt's resource, joined to its root span; the application's own exporter still sees its
spans unchanged, and a span outside any rollout reaches no attempt.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import httpx
import pytest
from conftest import StoreServer
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lightningstore import Span, SqlStore, StoreClient, semconv
from runner import AgentResources, Runner, agent_name, rollout
from runner.tracing.global_spans import capture_global_spans, global_span_router

TASKS = ["first", "second"]


@pytest.fixture
def app_exporter() -> Iterator[InMemorySpanExporter]:
    """The application's own exporter on the global provider (set up as an instrumented app would)."""
    assert capture_global_spans()
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


@pytest.fixture
def httpx_instrumented() -> Iterator[None]:
    HTTPXClientInstrumentor().instrument()
    try:
        yield
    finally:
        HTTPXClientInstrumentor().uninstrument()


async def enqueue(store: SqlStore | StoreClient) -> None:
    for task in TASKS:
        await store.enqueue_rollout(task, rollout_id=f"r-{task}")


def check_attempt(spans: list[Span], task: str, library_names: set[str]) -> dict[str, Span]:
    """The attempt holds its root, its library spans (tagged with its ids) and nothing of the other task."""
    named = {s.name: s for s in spans}
    assert library_names <= set(named), sorted(named)
    root = named["lightningrl.rollout"]
    for name in library_names:
        span = named[name]
        assert span.trace_id == root.trace_id
        assert span.rollout_id == f"r-{task}"
        assert span.resource[semconv.ROLLOUT_ID] == f"r-{task}"
        assert span.resource[semconv.ATTEMPT_ID] == span.attempt_id == root.attempt_id
    assert all(s.attributes.get("task", task) == task for s in spans)
    return named


async def test_instrumented_library_spans_reach_their_attempt_over_otlp(
    store_server: StoreServer, app_exporter: InMemorySpanExporter, httpx_instrumented: None
) -> None:
    both_started = asyncio.Barrier(2)
    library = trace.get_tracer("my.agent")

    @rollout(name="fetcher")
    async def agent(task: str, resources: AgentResources) -> float:
        with library.start_as_current_span("agent.plan", attributes={"task": task}):
            await both_started.wait()  # the two attempts' spans are open at the same time
            async with httpx.AsyncClient() as client:
                response = await client.get(f"{store_server.url}/healthz", params={"task": task})
            response.raise_for_status()
        return 1.0

    async with StoreClient(store_server.url) as client:
        await enqueue(client)
        runner = Runner(client, agent, workers=2, show_progress=False)
        summary = await runner.run(max_rollouts=2)
        assert summary.succeeded == 2
        for task in TASKS:
            spans = await client.query_spans(f"r-{task}")
            named = check_attempt(spans, task, {"agent.plan", "GET"})
            plan, get = named["agent.plan"], named["GET"]
            assert plan.parent_id == named["lightningrl.rollout"].span_id
            assert get.parent_id == plan.span_id
            assert f"task={task}" in str(get.attributes.get("url.full") or get.attributes.get("http.url"))
            assert plan.attributes[semconv.AGENT_NAME] == "fetcher"
            assert plan.resource["service.name"] == "lightningrl-runner"
    assert global_span_router().open_spans == 0

    # The application's exporter got its spans as the library made them: no attempt ids added.
    mine = [s for s in app_exporter.get_finished_spans() if s.name == "agent.plan"]
    assert len(mine) == 2
    assert all(semconv.ROLLOUT_ID not in (s.attributes or {}) for s in mine)


async def test_sync_agent_threads_and_spans_outside_rollouts(
    sql_store: SqlStore, app_exporter: InMemorySpanExporter
) -> None:
    library = trace.get_tracer("my.sync.agent")
    both_started = threading.Barrier(2, timeout=10)

    def agent(task: str, resources: AgentResources) -> float:
        with agent_name("planner"), library.start_as_current_span("agent.step", attributes={"task": task}):
            both_started.wait()
        return 1.0

    with library.start_as_current_span("outside.before"):
        pass
    await enqueue(sql_store)
    summary = await Runner(sql_store, agent, workers=2, show_progress=False).run(max_rollouts=2)
    assert summary.succeeded == 2
    with library.start_as_current_span("outside.after"):
        pass
    for task in TASKS:
        spans = await sql_store.query_spans(f"r-{task}")
        named = check_attempt(spans, task, {"agent.step"})
        assert named["agent.step"].attributes[semconv.AGENT_NAME] == "planner"
        assert sorted(named) == ["agent.step", "lightningrl.reward", "lightningrl.rollout"]
    outside = {s.name for s in app_exporter.get_finished_spans()} & {"outside.before", "outside.after"}
    assert outside == {"outside.before", "outside.after"}  # recorded for the app, in no attempt
