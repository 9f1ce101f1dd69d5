"""What an agent key may write, on a real store server with tokens: never the proxy's training
attributes, nothing once its attempt has ended; and a reward value is a number, never a bool."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import orjson
import pytest
from backends import LiveServer
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from lightningrl.credit import llm_calls
from lightningstore import AttemptedRollout, semconv
from lightningstore.client.store_client import StoreClient

ADMIN, RUNNER, SECRET = "sec-admin", "sec-runner", "sec-agent-secret"
TRAINING_ATTRIBUTES: dict[str, Any] = {
    semconv.LLM_PROMPT_TOKEN_IDS: [1, 2, 3],
    semconv.LLM_RESPONSE_TOKEN_IDS: [4, 5],
    semconv.LLM_RESPONSE_LOGPROBS: [-0.1, -0.2],
    semconv.LLM_CHOICES: '[{"token_ids": [4, 5], "logprobs": [-0.1, -0.2]}]',
    semconv.LLM_TRAINABLE: True,
}
LLM_CALL = {
    semconv.GEN_AI_OPERATION: "chat",
    semconv.GEN_AI_SYSTEM: "openai",
    **TRAINING_ATTRIBUTES,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A real store server process on 127.0.0.1 with an admin and a runner token and an agent secret."""
    root = tmp_path_factory.mktemp("agent-key-security")
    env = {
        "LIGHTNINGRL_ADMIN_TOKEN": ADMIN,
        "LIGHTNINGRL_RUNNER_TOKEN": RUNNER,
        "LIGHTNINGRL_AGENT_SECRET": SECRET,
    }
    live = LiveServer(root / "store.db", root / "server.log", env=env).start()
    yield live
    live.stop()


@pytest.fixture
async def admin(server: LiveServer) -> AsyncIterator[StoreClient]:
    async with StoreClient(server.url, token=ADMIN, max_retries=0) as client:
        yield client


async def _claim(admin: StoreClient) -> tuple[AttemptedRollout, str]:
    """A running attempt and its agent key (minted by the runner token, as a runner does)."""
    claim = await admin.start_rollout({"q": 1})
    async with StoreClient(admin.base_url, token=RUNNER, max_retries=0) as runner:
        await runner.heartbeat(claim.rollout_id, claim.attempt_id)
        return claim, await runner.mint_agent_key(claim.rollout_id, claim.attempt_id)


def _span_json(claim: AttemptedRollout, span_id: str, attributes: dict[str, Any]) -> dict[str, Any]:
    return {
        "rollout_id": claim.rollout_id,
        "attempt_id": claim.attempt_id,
        "trace_id": "ab" * 16,
        "span_id": span_id,
        "name": "chat",
        "attributes": attributes,
    }


def _otlp_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_otlp_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _otlp_json(claim: AttemptedRollout, span_id: str, attributes: dict[str, Any]) -> bytes:
    binding = {semconv.ROLLOUT_ID: claim.rollout_id, semconv.ATTEMPT_ID: claim.attempt_id}
    span = {
        "traceId": "ab" * 16,
        "spanId": span_id,
        "name": "chat",
        "attributes": [{"key": k, "value": _otlp_value(v)} for k, v in {**binding, **attributes}.items()],
    }
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


def _export_protobuf(url: str, key: str, claim: AttemptedRollout, attributes: dict[str, Any]) -> bool:
    """One span through the stock OTLP/HTTP protobuf exporter with `key`; whether the server took it."""
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers={"authorization": f"Bearer {key}"})
    sent: list[bool] = []

    class Recording(SimpleSpanProcessor):
        def on_end(self, span: Any) -> None:
            sent.append(self.span_exporter.export([span]).name == "SUCCESS")

    resource = Resource.create({semconv.ROLLOUT_ID: claim.rollout_id, semconv.ATTEMPT_ID: claim.attempt_id})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(Recording(exporter))
    with provider.get_tracer("agent").start_as_current_span("chat") as span:
        span.set_attributes(attributes)
    provider.shutdown()
    return sent == [True]


async def _post(server: LiveServer, path: str, key: str, **kwargs: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.url, headers={"authorization": f"Bearer {key}"}) as http:
        return await http.post(path, **kwargs)


# ---- 1. an agent key never writes the proxy's training attributes ----------------------------------


@pytest.mark.parametrize("attribute", sorted(TRAINING_ATTRIBUTES))
async def test_agent_key_may_not_write_training_attributes_to_v1_spans(
    server: LiveServer, admin: StoreClient, attribute: str
) -> None:
    claim, key = await _claim(admin)
    attributes = {semconv.GEN_AI_OPERATION: "chat", attribute: TRAINING_ATTRIBUTES[attribute]}
    ok = _span_json(claim, "00000000000000a1", {semconv.GEN_AI_OPERATION: "chat"})
    forged = _span_json(claim, "00000000000000a2", attributes)
    response = await _post(server, "/v1/spans", key, json=[ok, forged])
    assert response.status_code == 403, response.text
    assert attribute in response.json()["message"] and "proxy" in response.json()["message"]
    assert await admin.query_spans(claim.rollout_id) == []  # all or none: the good span is not stored


async def test_agent_key_may_not_write_training_attributes_over_otlp(
    server: LiveServer, admin: StoreClient
) -> None:
    claim, key = await _claim(admin)
    response = await _post(
        server,
        "/v1/traces",
        key,
        content=_otlp_json(claim, "00000000000000b1", LLM_CALL),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 403, response.text
    assert semconv.LLM_PROMPT_TOKEN_IDS in response.json()["message"]
    assert not _export_protobuf(server.url, key, claim, LLM_CALL)
    spans = await admin.query_spans(claim.rollout_id)
    assert spans == [] and llm_calls(spans) == []


async def test_agent_key_still_writes_its_own_spans_and_the_runner_its_llm_calls(
    server: LiveServer, admin: StoreClient
) -> None:
    claim, key = await _claim(admin)
    plain = {semconv.GEN_AI_OPERATION: "chat", semconv.GEN_AI_REQUEST_MODEL: "m", "tool": "calc"}
    response = await _post(server, "/v1/spans", key, json=[_span_json(claim, "00000000000000c1", plain)])
    assert response.status_code == 200, response.text
    otlp = _otlp_json(claim, "00000000000000c2", plain)
    response = await _post(
        server, "/v1/traces", key, content=otlp, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text
    assert _export_protobuf(server.url, key, claim, plain)
    # The runner's own recordings (instrumented clients) keep their tokens: its token may write them.
    runner_span = _span_json(claim, "00000000000000c3", LLM_CALL)
    assert (await _post(server, "/v1/spans", RUNNER, json=[runner_span])).status_code == 200
    spans = await admin.query_spans(claim.rollout_id)
    trainable = [c for c in llm_calls(spans) if c.trainable]
    assert len(spans) == 4 and [c.span_id for c in trainable] == ["00000000000000c3"]


# ---- 2. an agent key is valid only while its attempt is live ---------------------------------------


@pytest.mark.parametrize("ending", ["succeeded", "failed"])
async def test_agent_key_expires_when_its_attempt_ends(
    server: LiveServer, admin: StoreClient, ending: str
) -> None:
    claim, key = await _claim(admin)
    span = _span_json(claim, "00000000000000d1", {"step": 1})
    assert (await _post(server, "/v1/spans", key, json=[span])).status_code == 200
    reward = {"rollout_id": claim.rollout_id, "value": 1.0}
    assert (await _post(server, "/v1/rewards", key, json=reward)).status_code == 200
    async with StoreClient(server.url, token=RUNNER, max_retries=0) as runner:
        await runner.finish_attempt(claim.rollout_id, claim.attempt_id, status=ending)

    events = semconv.AGL_EVENTS_PATH.format(rollout_id=claim.rollout_id, attempt_id=claim.attempt_id)
    late = [
        await _post(server, "/v1/spans", key, json=[_span_json(claim, "00000000000000d2", {"step": 2})]),
        await _post(
            server,
            "/v1/traces",
            key,
            content=_otlp_json(claim, "00000000000000d3", {"step": 3}),
            headers={"content-type": "application/json"},
        ),
        await _post(server, "/v1/rewards", key, json={**reward, "value": 0.0}),
        await _post(server, events, key, json={"event_type": "reward", "data": {"value": 0.5}}),
        await _post(server, events, key, json={"event_type": "note", "data": {"x": 1}}),
    ]
    for response in late:
        assert response.status_code == 403, response.text
        assert f"attempt {claim.attempt_id!r}" in response.json()["message"]
        assert f"ended ({ending})" in response.json()["message"]
    assert not _export_protobuf(server.url, key, claim, {"step": 4})
    assert [s.span_id for s in await admin.query_spans(claim.rollout_id)] == ["00000000000000d1"]
    assert [r.value for r in await admin.query_rewards(claim.rollout_id)] == [1.0]


async def test_agent_key_of_an_unresponsive_attempt_still_writes(
    server: LiveServer, admin: StoreClient
) -> None:
    claim, key = await _claim(admin)
    await admin.update_attempt(claim.rollout_id, claim.attempt_id, status="unresponsive")
    span = _span_json(claim, "00000000000000e1", {"late": True})
    assert (await _post(server, "/v1/spans", key, json=[span])).status_code == 200
    (attempt,) = await admin.query_attempts(claim.rollout_id)
    assert attempt.status == "running"  # a late span revives it, as the state machine says


# ---- 3. a reward value is a number, never a bool ----------------------------------------------------


@pytest.mark.parametrize("value", [True, False, "1.0"])
async def test_a_reward_value_that_is_not_a_number_is_422(
    server: LiveServer, admin: StoreClient, value: object
) -> None:
    claim, key = await _claim(admin)
    for token in (RUNNER, key):
        response = await _post(
            server, "/v1/rewards", token, json={"rollout_id": claim.rollout_id, "value": value}
        )
        assert response.status_code == 422, response.text
        assert response.json()["details"]["field"] == "value" and "value" in response.json()["message"]
    assert await admin.query_rewards(claim.rollout_id) == []
    response = await _post(server, "/v1/rewards", key, json={"rollout_id": claim.rollout_id, "value": 1})
    assert response.status_code == 200 and response.json()["value"] == 1.0
