"""Scoped tokens: 401 for missing/unknown credentials, 403 out of scope, agent keys bound to one attempt."""

from __future__ import annotations

import pytest

from lightningstore import LLM, PermissionDeniedError, PromptTemplate, RewardIn, SpanIn
from lightningstore.auth import Role, TokenConfig, agent_key, verify_agent_key
from lightningstore.server.run import is_loopback, serve


def _span(rollout_id: str, attempt_id: str, span_id: str = "s1") -> SpanIn:
    return SpanIn(rollout_id=rollout_id, attempt_id=attempt_id, trace_id="t", span_id=span_id, name="step")


def _status(exc: pytest.ExceptionInfo[BaseException]) -> int:
    return exc.value.status_code  # type: ignore[attr-defined]


async def test_missing_or_unknown_token_is_401(make_client) -> None:
    for token in (None, "nope", "lrk1.x.y.z"):
        with pytest.raises(PermissionDeniedError) as exc:
            await make_client(token).query_rollouts()
        assert _status(exc) == 401


async def test_algorithm_scope(make_client) -> None:
    alg = make_client("alg-token")
    rollout = await alg.enqueue_rollout({"q": 1})
    assert [r.rollout_id for r in await alg.query_rollouts()] == [rollout.rollout_id]
    v1 = await alg.add_resource_version("prompt", PromptTemplate(template="a {x}"))
    v2 = await alg.add_resource_version("prompt", PromptTemplate(template="b {x}"), parent_id=v1.version_id)
    await alg.move_pointer("prompt", "latest", v1.version_id, actor="alg")
    with pytest.raises(PermissionDeniedError, match="algorithm role may not move `approved`") as exc:
        await alg.move_pointer("prompt", "approved", v2.version_id, actor="alg")
    assert _status(exc) == 403
    assert (await alg.get_approved_version("prompt")).version_id == v1.version_id
    for forbidden in (alg.dequeue_rollout(), alg.sweep_stale_attempts()):
        with pytest.raises(PermissionDeniedError) as exc:
            await forbidden
        assert _status(exc) == 403


async def test_approver_moves_approved_only(make_client) -> None:
    alg, approver = make_client("alg-token"), make_client("apr-token")
    llm = LLM(endpoints=["http://x/v1"], model="m")
    v1 = await alg.add_resource_version("llm", llm)
    v2 = await alg.add_resource_version(
        "llm", llm.model_copy(update={"model": "m2"}), parent_id=v1.version_id
    )
    move = await approver.move_pointer(
        "llm", "approved", v2.version_id, actor="reviewer", reason="gate passed"
    )
    assert move.previous_version_id == v1.version_id
    with pytest.raises(PermissionDeniedError):
        await approver.move_pointer("llm", "latest", v1.version_id, actor="reviewer")
    with pytest.raises(PermissionDeniedError):
        await approver.enqueue_rollout(1)


async def test_approver_reads_the_evidence_but_cannot_write_it(make_client) -> None:
    alg, runner, approver = make_client("alg-token"), make_client("run-token-2"), make_client("apr-token")
    rollout = await alg.enqueue_rollout({"q": 1})
    claimed = await runner.dequeue_rollout("w1")
    assert claimed is not None and claimed.rollout_id == rollout.rollout_id
    await runner.add_span(_span(claimed.rollout_id, claimed.attempt_id))

    assert [s.span_id for s in await approver.query_spans(claimed.rollout_id)] == ["s1"]
    assert await approver.query_rewards(claimed.rollout_id) == []
    batch = await approver.query_spans_many([claimed.rollout_id])
    assert [s.span_id for s in batch[claimed.rollout_id]] == ["s1"]
    assert await approver.query_rewards_many([claimed.rollout_id]) == {claimed.rollout_id: []}
    with pytest.raises(PermissionDeniedError):
        await approver.add_span(_span(claimed.rollout_id, claimed.attempt_id, "s2"))
    assert [s.span_id for s in await approver.query_spans(claimed.rollout_id)] == ["s1"]


async def test_runner_scope(make_client) -> None:
    alg, runner = make_client("alg-token"), make_client("run-token-2")
    await alg.enqueue_rollout({"q": 1})
    claimed = await runner.dequeue_rollout("w1")
    assert claimed is not None
    await runner.heartbeat(claimed.rollout_id, claimed.attempt_id, worker_id="w1")
    await runner.add_span(_span(claimed.rollout_id, claimed.attempt_id))
    await runner.update_attempt(claimed.rollout_id, claimed.attempt_id, status="succeeded")
    assert (await runner.get_rollout_by_id(claimed.rollout_id)).status == "succeeded"
    forbidden_calls = (
        runner.enqueue_rollout(2),
        runner.query_spans(claimed.rollout_id),
        runner.query_spans_many([claimed.rollout_id]),
        runner.query_rewards_many([claimed.rollout_id]),
        runner.statistics(),
    )
    for forbidden in forbidden_calls:
        with pytest.raises(PermissionDeniedError) as exc:
            await forbidden
        assert _status(exc) == 403


async def test_agent_key_writes_only_its_attempt(make_client, tokens) -> None:
    runner = make_client("run-token")
    mine = await runner.start_rollout(1)
    other = await runner.start_rollout(2)
    key = await runner.mint_agent_key(mine.rollout_id, mine.attempt_id)
    assert key == agent_key(tokens["agent_secret"], mine.rollout_id, mine.attempt_id)
    agent = make_client(key)
    await agent.add_span(_span(mine.rollout_id, mine.attempt_id))
    reward = await agent.add_reward(RewardIn(rollout_id=mine.rollout_id, value=1.0))
    assert reward.attempt_id == mine.attempt_id  # an agent key's rewards belong to its attempt
    denied = (
        agent.add_span(_span(other.rollout_id, other.attempt_id)),
        agent.add_many_spans(
            [_span(mine.rollout_id, mine.attempt_id, "s2"), _span(other.rollout_id, other.attempt_id)]
        ),
        agent.add_reward(RewardIn(rollout_id=other.rollout_id, value=0.0)),
        agent.dequeue_rollout(),
        agent.query_spans(mine.rollout_id),
        agent.query_spans_many([mine.rollout_id]),
        agent.query_rewards_many([mine.rollout_id]),
    )
    for call in denied:
        with pytest.raises(PermissionDeniedError) as exc:
            await call
        assert _status(exc) == 403
    assert [s.span_id for s in await make_client("adm-token").query_spans(mine.rollout_id)] == ["s1"]
    forged = agent_key("wrong-secret", other.rollout_id, other.attempt_id)
    with pytest.raises(PermissionDeniedError) as exc:
        await make_client(forged).add_span(_span(other.rollout_id, other.attempt_id))
    assert _status(exc) == 401


def test_agent_key_roundtrip_and_tamper() -> None:
    key = agent_key("s", "ro/1.x", "at-ü")
    assert verify_agent_key("s", key) == ("ro/1.x", "at-ü")
    assert verify_agent_key("t", key) is None
    head, rollout, attempt, sig = key.split(".")
    swapped = ".".join([head, attempt, rollout, sig])
    assert verify_agent_key("s", swapped) is None
    assert verify_agent_key("s", key + "x") is None
    assert verify_agent_key("s", "lrk1.é.é.é") is None


async def test_dev_mode_is_open(raw_http) -> None:
    response = await raw_http.post("/v1/rollouts", json=[{"input": 1}])
    assert response.status_code == 200
    assert (await raw_http.post("/v1/watchdog/sweep", json={})).status_code == 200


def test_token_config_sources(tmp_path) -> None:
    env = {
        "LIGHTNINGRL_ADMIN_TOKEN": "a1, a2",
        "LIGHTNINGRL_RUNNER_TOKEN": "r",
        "LIGHTNINGRL_AGENT_SECRET": "k",
    }
    tokens = TokenConfig.from_env(env)
    assert tokens.resolve("a2").role == Role.ADMIN and tokens.resolve("r").role == Role.RUNNER
    assert tokens.resolve("zzz") is None and tokens.resolve(None) is None
    path = tmp_path / "tokens.json"
    path.write_text('{"approver": ["p"], "algorithm": "g"}')
    merged = tokens.merged(TokenConfig.from_file(path))
    assert merged.resolve("p").role == Role.APPROVER and merged.agent_secret == "k"
    with pytest.raises(ValueError, match="two roles"):
        TokenConfig.from_mapping({"admin": "same", "runner": "same"})
    with pytest.raises(ValueError, match="unknown role"):
        TokenConfig.from_mapping({"root": "x"})
    assert TokenConfig().resolve(None).role == Role.ADMIN  # dev mode


def test_refuses_public_host_without_tokens(tmp_path) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    with pytest.raises(SystemExit, match="without tokens"):
        serve(str(tmp_path / "s.db"), host="0.0.0.0", port=1)


async def test_live_server_reads_tokens_from_env_and_file(tmp_path) -> None:
    from backends import LiveServer

    from lightningstore.client.store_client import StoreClient

    (tmp_path / "tokens.json").write_text('{"runner": "file-runner"}')
    server = LiveServer(
        tmp_path / "store.db",
        tmp_path / "server.log",
        extra_args=("--tokens-file", str(tmp_path / "tokens.json")),
        env={"LIGHTNINGRL_ALGORITHM_TOKEN": "env-alg"},
    ).start()
    try:
        async with StoreClient(server.url) as anonymous:
            with pytest.raises(PermissionDeniedError) as exc:
                await anonymous.query_rollouts()
            assert _status(exc) == 401
        async with (
            StoreClient(server.url, "env-alg") as alg,
            StoreClient(server.url, "file-runner") as runner,
        ):
            await alg.enqueue_rollout(1)
            assert (await runner.dequeue_rollout("w")) is not None
    finally:
        server.stop()
