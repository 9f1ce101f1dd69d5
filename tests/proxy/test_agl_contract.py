"""Agent Lightning v1.0's agent contract on the store server: the `/openai/v1` proxy form, the events
endpoint (reward and other events, with the attempt's key), and sampling per mode as it does it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from conftest import SECRET, SERVED, TOKENS, Env

from lightningrl.credit.calls import is_llm_span
from lightningstore import LLM, AttemptedRollout, semconv
from lightningstore.auth import agent_key

QUESTION = [{"role": "user", "content": "What is 12 plus 7?"}]


def agl_base_url(env: Env, claimed: AttemptedRollout, mode: str = "train") -> str:
    return semconv.agl_base_url(env.base_url(claimed.rollout_id, claimed.attempt_id, mode))


def event_url(env: Env, claimed: AttemptedRollout) -> str:
    return semconv.agl_event_url(env.url, claimed.rollout_id, claimed.attempt_id)


def key_of(claimed: AttemptedRollout) -> str:
    return agent_key(SECRET, claimed.rollout_id, claimed.attempt_id)


def post_event(env: Env, claimed: AttemptedRollout, body: Any, key: str | None = None) -> httpx.Response:
    headers = {} if key == "" else {"Authorization": f"Bearer {key or key_of(claimed)}"}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        event_url(env, claimed),
        content=content,
        headers={**headers, "content-type": "application/json"},
        timeout=30,
    )


async def test_the_openai_v1_form_is_the_same_proxy(env: Env) -> None:
    claimed = await env.attempt()
    base_url = agl_base_url(env, claimed)
    assert base_url.endswith("/mode/train/openai/v1")
    client = openai.AsyncOpenAI(base_url=base_url, api_key=key_of(claimed), max_retries=0)
    reply = await client.chat.completions.create(model="any", messages=QUESTION, max_tokens=6)
    (span,) = await env.spans(claimed)
    assert is_llm_span(span) and span.attributes[semconv.LLM_TRAINABLE] is True
    response_ids = span.attributes[semconv.LLM_RESPONSE_TOKEN_IDS]
    assert span.attributes[semconv.LLM_PROMPT_TOKEN_IDS] and response_ids
    assert env.reference.decode(response_ids) == reply.choices[0].message.content
    # As v1.0's gateway: the token ids come back unasked (a token-in/token-out agent reads them).
    assert reply.choices[0].model_extra["token_ids"] == response_ids
    assert reply.model_extra["prompt_token_ids"] == span.attributes[semconv.LLM_PROMPT_TOKEN_IDS]
    text = await client.completions.create(model="any", prompt="The big cat", max_tokens=3)
    assert text.choices[0].text is not None and len(await env.spans(claimed)) == 2
    assert len(text.choices[0].model_extra["token_ids"]) == 3
    # The proxy's own base URL still answers plain OpenAI: ids only for an agent that asks.
    plain = openai.AsyncOpenAI(base_url=env.base_url(claimed.rollout_id, claimed.attempt_id, "train"),
                               api_key=key_of(claimed), max_retries=0)  # fmt: skip
    own = await plain.chat.completions.create(model="any", messages=QUESTION, max_tokens=2)
    assert "token_ids" not in (own.choices[0].model_extra or {}) and "prompt_token_ids" not in (
        own.model_extra or {}
    )
    assert [m.id for m in (await client.models.list()).data] == [SERVED]

    other = await env.attempt()
    intruder = openai.AsyncOpenAI(base_url=base_url, api_key=key_of(other), max_retries=0)
    with pytest.raises(openai.PermissionDeniedError, match="may not call the model"):
        await intruder.chat.completions.create(model="any", messages=QUESTION, max_tokens=2)


async def test_a_reward_event_is_stored_as_the_primary_reward(env: Env) -> None:
    claimed = await env.attempt()
    response = post_event(env, claimed, {"event_type": "reward", "data": {"value": 0.75, "reason": "ok"}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["event_type"], body["data"]) == ("reward", {"value": 0.75, "reason": "ok"})
    assert (body["rollout_id"], body["attempt_id"]) == (claimed.rollout_id, claimed.attempt_id)
    assert isinstance(body["timestamp"], float)
    (reward,) = await env.store.query_rewards(claimed.rollout_id)
    assert (reward.value, reward.primary, reward.attempt_id) == (0.75, True, claimed.attempt_id)
    assert reward.judges_episode and reward.name == "reward"

    integer = post_event(env, claimed, {"event_type": "reward", "data": {"value": 1}})
    assert integer.status_code == 200 and len(await env.store.query_rewards(claimed.rollout_id)) == 2


async def test_other_event_types_are_kept_as_spans(env: Env) -> None:
    claimed = await env.attempt()
    response = post_event(env, claimed, {"event_type": "agent_output", "data": {"patch": "diff --git"}})
    assert response.status_code == 200, response.text
    (span,) = await env.spans(claimed)
    assert span.name == semconv.EVENT_SPAN_NAME and not is_llm_span(span)
    assert span.attributes[semconv.EVENT_TYPE] == "agent_output"
    assert json.loads(span.attributes[semconv.EVENT_DATA]) == {"patch": "diff --git"}
    assert post_event(env, claimed, {"event_type": "done"}).status_code == 200  # data defaults to {}


async def test_events_are_refused_with_a_reason(env: Env) -> None:
    claimed, other = await env.attempt(), await env.attempt()
    reward = {"event_type": "reward", "data": {"value": 1.0}}

    assert post_event(env, claimed, reward, key="").status_code == 401
    assert post_event(env, claimed, reward, key="not-a-key").status_code == 401
    foreign = post_event(env, claimed, reward, key=key_of(other))
    assert foreign.status_code == 403 and claimed.attempt_id in foreign.json()["message"]

    cases: list[tuple[Any, int, str]] = [
        (b"{not json", 400, "malformed JSON"),
        ({"data": {"value": 1.0}}, 422, "event_type"),
        ({"event_type": "", "data": {}}, 422, "event_type"),
        ({"event_type": "reward", "data": []}, 422, "data"),
        ({"event_type": "reward", "data": {}}, 422, "data.value"),
        ({"event_type": "reward", "data": {"value": "high"}}, 422, "data.value"),
        ({"event_type": "reward", "data": {"value": True}}, 422, "data.value"),
        (b'{"event_type": "reward", "data": {"value": NaN}}', 422, "finite"),
        ({"event_type": "model_request", "data": {}}, 422, "recorded by the model proxy"),
    ]
    for body, status, reason in cases:
        response = post_event(env, claimed, body)
        assert (response.status_code, reason in response.text) == (status, True), (body, response.text)
    model_request = post_event(env, claimed, {"event_type": "model_request", "data": {}}).json()
    assert "'reward'" in model_request["message"] and model_request["details"]["field"] == "event_type"
    assert await env.store.query_rewards(claimed.rollout_id) == []
    assert await env.spans(claimed) == []

    admin = {"Authorization": f"Bearer {TOKENS['admin']}"}
    missing = httpx.post(
        semconv.agl_event_url(env.url, claimed.rollout_id, "no-such-attempt"), json=reward, headers=admin
    )
    assert missing.status_code == 404 and "no-such-attempt" in missing.text


async def stub_call(env: Env, resource: LLM, mode: str, **sampling: float) -> tuple[dict, dict]:
    """One chat call for a rollout bound to `resource` (on the stub): the body the stub received and
    the span's attributes."""
    bound = await env.store.add_resources({"llm": resource})
    claimed = await env.attempt(bound.resources_id, mode=mode)
    client = openai.AsyncOpenAI(base_url=agl_base_url(env, claimed, mode), api_key=key_of(claimed))
    await client.chat.completions.create(model="m", messages=QUESTION, **sampling)
    (span,) = await env.spans(claimed)
    return env.stub.app.state.bodies[-1], span.attributes


async def test_train_mode_samples_the_models_distribution_whatever_the_agent_asked(env: Env) -> None:
    stub = LLM(endpoints=[f"{env.stub.url}/v1"], model="stub-model")
    sent, attributes = await stub_call(env, stub, "train", temperature=0.2, top_p=0.5)
    assert (sent["temperature"], sent["top_p"]) == (1.0, 1.0)
    assert (attributes[semconv.GEN_AI_TEMPERATURE], attributes[semconv.GEN_AI_TOP_P]) == (1.0, 1.0)
    assert attributes[semconv.LLM_AGENT_TEMPERATURE] == 0.2
    assert attributes[semconv.LLM_AGENT_TOP_P] == 0.5

    sent, attributes = await stub_call(env, stub, "val", temperature=0.2)
    assert sent["temperature"] == 0.7 and attributes[semconv.LLM_AGENT_TEMPERATURE] == 0.2
    sent, attributes = await stub_call(env, stub, "val")
    assert sent["temperature"] == 0.7 and semconv.LLM_AGENT_TEMPERATURE not in attributes
    sent, _ = await stub_call(
        env, stub.model_copy(update={"sampling_by_mode": {"val": {"temperature": 1.0}}}), "val"
    )
    assert sent["temperature"] == 1.0  # per resource, as the calc demo measures its held-out


async def test_an_opted_out_resource_keeps_the_agents_temperature(env: Env) -> None:
    stub = LLM(endpoints=[f"{env.stub.url}/v1"], model="stub-model", respect_agent_sampling=["train"])
    sent, attributes = await stub_call(env, stub, "train", temperature=0.2)
    assert (sent["temperature"], sent["top_p"]) == (0.2, 1.0)  # the mode's top_p fills the gap
    assert attributes[semconv.GEN_AI_TEMPERATURE] == 0.2  # what the trainer will score at
    assert semconv.LLM_AGENT_TEMPERATURE not in attributes  # nothing was overridden
