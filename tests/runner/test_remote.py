"""A runner against the store server over HTTP: spans travel as OTLP/HTTP to `/v1/traces`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import _serve_in_thread

from lightningstore import AttemptStatus, SqlStore
from lightningstore.auth import TokenConfig
from lightningstore.client.store_client import StoreClient
from lightningstore.server import build_app
from runner import AgentResources, Runner, emit_reward, rollout, trace
from runner.tracing.sink import OtlpSink


@trace(kind="tool")
def lookup(key: str) -> str:
    return key * 2


@rollout
def agent(task: str, resources: AgentResources) -> float:
    lookup(task)
    emit_reward(0.5, name="partial")
    if task == "boom":
        raise RuntimeError("remote failure")
    return 1.0


@pytest.fixture(params=["dev", "tokens"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, TokenConfig]]:
    """The store server, in dev mode or with a runner token and an agent-key secret."""
    tokens = (
        TokenConfig()
        if request.param == "dev"
        else TokenConfig.from_mapping({"runner": "rt", "admin": "at", "agent_secret": "s3cret"})
    )
    app = build_app(SqlStore(tmp_path / "remote.db"), tokens=tokens, sweep_interval=None, close_store=True)
    url, uvicorn_server, thread = _serve_in_thread(app, "runner-remote-store")
    yield url, tokens
    uvicorn_server.should_exit = True  # type: ignore[attr-defined]
    thread.join(timeout=10)  # type: ignore[attr-defined]


async def test_runner_over_http_exports_spans_with_otlp(server: tuple[str, TokenConfig]) -> None:
    url, tokens = server
    secret = tokens.agent_secret
    async with (
        StoreClient(url, token="at" if tokens.enabled else None) as admin,
        StoreClient(url, token="rt" if tokens.enabled else None) as client,
    ):
        await admin.enqueue_rollout("ab", rollout_id="remote-ok")
        await admin.enqueue_rollout("boom", rollout_id="remote-boom")
        runner = Runner(
            client, agent, workers=2, agent_key_secret=secret, heartbeat_interval=0.2, show_progress=False
        )
        sink = runner._sink("r", "a")
        # one exporter for every attempt, with the runner's own token even when agent keys are on
        assert sink.sink.__class__ is OtlpSink and runner._sink("r2", "a2") is sink
        expected = {"authorization": "Bearer rt"} if tokens.enabled else {}
        assert sink.sink.headers == expected
        summary = await runner.run(max_rollouts=2)
        assert (summary.succeeded, summary.failed) == (1, 1)

        for rollout_id in ("remote-ok", "remote-boom"):
            (attempt,) = await admin.query_attempts(rollout_id)
            spans = await admin.query_spans(rollout_id)
            names = sorted(s.name for s in spans)
            expected = ["lightningrl.reward", "lightningrl.rollout", "tool.lookup"]
            if rollout_id == "remote-ok":
                expected = ["lightningrl.reward", *expected]
            assert names == expected
            assert {s.attempt_id for s in spans} == {attempt.attempt_id}
            assert all(s.resource["lightningrl.attempt_id"] == attempt.attempt_id for s in spans)
            tool = next(s for s in spans if s.name == "tool.lookup")
            if rollout_id != "remote-boom":  # the failing agent raises after its tool call
                assert tool.attributes["lightningrl.trace.result"] == '"abab"'
        (boom,) = await admin.query_attempts("remote-boom")
        assert boom.status == AttemptStatus.FAILED and "RuntimeError: remote failure" in (
            boom.failure_reason or ""
        )
        rewards = {(r.name, r.value) for r in await admin.query_rewards("remote-ok")}
        assert rewards == {("partial", 0.5), ("reward", 1.0)}
