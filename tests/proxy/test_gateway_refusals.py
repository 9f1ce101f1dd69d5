"""What the gateway refuses (404/409/403/401/400/422) and observe-only providers through litellm."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from conftest import SECRET, SERVED, TOKENS, Env

from lightningstore import LLM, semconv
from lightningstore.auth import agent_key

HI = [{"role": "user", "content": "hi"}]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def post(
    env: Env, rollout_id: str, attempt_id: str, headers: dict[str, str], **kwargs: Any
) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        url = f"{env.base_url(rollout_id, attempt_id)}/chat/completions"
        return await http.post(url, headers=headers, **kwargs)


async def test_unknown_rollout_or_attempt_is_404(env: Env) -> None:
    claimed = await env.attempt()
    runner = bearer(TOKENS["runner"])
    missing = await post(
        env, "ro-nope", "at-nope", bearer(agent_key(SECRET, "ro-nope", "at-nope")), json={"messages": HI}
    )
    assert missing.status_code == 404 and "rollout 'ro-nope' not found" in missing.json()["error"]["message"]
    unknown = await post(env, claimed.rollout_id, "at-nope", runner, json={"messages": HI})
    assert unknown.status_code == 404 and "attempt 'at-nope' not found" in unknown.text
    assert await env.store.query_spans(claimed.rollout_id) == []


async def test_a_finished_attempt_is_409_streaming_or_not(env: Env) -> None:
    claimed = await env.attempt()
    client = env.client(claimed, max_retries=0)
    await client.chat.completions.create(model=SERVED, messages=HI, max_tokens=2)
    await env.store.update_attempt(claimed.rollout_id, claimed.attempt_id, status="succeeded")
    for stream in (False, True):
        with pytest.raises(openai.ConflictError, match="already ended"):
            await client.chat.completions.create(model=SERVED, messages=HI, max_tokens=2, stream=stream)
    assert len(await env.spans(claimed)) == 1


async def test_credentials(env: Env) -> None:
    mine, other = await env.attempt(), await env.attempt()
    foreign = bearer(agent_key(SECRET, other.rollout_id, other.attempt_id))
    body = {"messages": HI, "max_tokens": 2}
    refused = await post(env, mine.rollout_id, mine.attempt_id, foreign, json=body)
    assert refused.status_code == 403 and "may not call the model" in refused.json()["error"]["message"]
    assert (
        await post(env, mine.rollout_id, mine.attempt_id, bearer(TOKENS["approver"]), json=body)
    ).status_code == 403
    assert (await post(env, mine.rollout_id, mine.attempt_id, {}, json=body)).status_code == 401
    assert (
        await post(env, mine.rollout_id, mine.attempt_id, bearer("lrk1.forged"), json=body)
    ).status_code == 401
    for role in ("runner", "algorithm", "admin"):
        assert (
            await post(env, mine.rollout_id, mine.attempt_id, bearer(TOKENS[role]), json=body)
        ).status_code == 200
    assert len(await env.spans(mine)) == 3 and await env.spans(other) == []


@pytest.mark.parametrize(
    ("content", "status", "reason"),
    [
        (b"{not json", 400, "malformed JSON"),
        (b"[1, 2]", 422, "must be a JSON object"),
        (b'{"model": "m"}', 422, "messages must be a non-empty list"),
        (b'{"messages": [{"content": "no role"}]}', 422, "string role"),
        (b'{"messages": [{"role": "user", "content": "x"}], "n": 0}', 422, "n must be a positive integer"),
    ],
)
async def test_malformed_bodies_get_a_reason(env: Env, content: bytes, status: int, reason: str) -> None:
    claimed = await env.attempt()
    key = bearer(agent_key(SECRET, claimed.rollout_id, claimed.attempt_id))
    response = await post(env, claimed.rollout_id, claimed.attempt_id, key, content=content)
    assert response.status_code == status and reason in response.json()["error"]["message"]


async def test_an_unknown_mode_is_422(env: Env) -> None:
    claimed = await env.attempt()
    async with httpx.AsyncClient() as http:
        url = f"{env.url}/proxy/rollout/{claimed.rollout_id}/attempt/{claimed.attempt_id}/mode/prod/v1/chat/completions"
        response = await http.post(url, json={"messages": HI}, headers=bearer(TOKENS["runner"]))
    assert response.status_code == 422 and "mode" in response.text


async def test_several_llms_are_told_apart_by_model(env: Env) -> None:
    stub = f"{env.stub.url}/v1"
    resources = await env.store.add_resources(
        {
            "judge": LLM(endpoints=[stub], model="judge-model"),
            "actor": LLM(endpoints=env.endpoints, model=SERVED),
        }
    )
    claimed = await env.attempt(resources.resources_id)
    client = env.client(claimed, max_retries=0)
    judged = await client.chat.completions.create(model="judge-model", messages=HI)
    assert judged.choices[0].message.content == "stub answer"
    with pytest.raises(openai.ConflictError, match="several LLM resources"):
        await client.chat.completions.create(model="who-knows", messages=HI)
    (span,) = await env.spans(claimed)
    assert span.attributes[semconv.LLM_RESOURCE_VERSION] == resources.versions["judge"].version_id


class FakeProvider:
    """A fake litellm provider for the test (no network): answers with a fixed text and remembers the call."""

    calls: list[dict[str, Any]] = []

    @staticmethod
    def make() -> Any:
        import litellm
        from litellm import CustomLLM

        class Handler(CustomLLM):
            async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
                FakeProvider.calls.append(kwargs)
                last = kwargs["messages"][-1]["content"]
                return litellm.completion(
                    model="gpt-3.5-turbo", messages=kwargs["messages"], mock_response=f"fake: {last}"
                )

        return Handler()


async def test_a_non_openai_provider_is_observed_through_litellm(env: Env) -> None:
    import litellm

    litellm.custom_provider_map = [{"provider": "fake-provider", "custom_handler": FakeProvider.make()}]
    from litellm.utils import custom_llm_setup

    custom_llm_setup()
    llm = LLM(
        endpoints=["http://fake.invalid/v1"],
        model="fake-model",
        provider="fake-provider",
        sampling={"temperature": 0.3},
    )
    resources = await env.store.add_resources({"llm": llm})
    claimed = await env.attempt(resources.resources_id)
    client = env.client(claimed, max_retries=0)
    reply = await client.chat.completions.create(model="x", messages=HI)
    assert reply.choices[0].message.content == "fake: hi"
    assert FakeProvider.calls[-1]["optional_params"].get("temperature") == 0.3
    stream = await client.chat.completions.create(
        model="x", messages=[{"role": "user", "content": "yo"}], stream=True
    )
    streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert streamed == "fake: yo"
    spans = await env.spans(claimed)
    assert [s.attributes[semconv.LLM_RESPONSE_TEXT] for s in spans] == ["fake: hi", "fake: yo"]
    for span in spans:
        assert span.attributes[semconv.LLM_TRAINABLE] is False
        assert span.attributes[semconv.GEN_AI_SYSTEM] == "fake-provider"
        assert semconv.LLM_RESPONSE_TOKEN_IDS not in span.attributes
        assert span.attributes[semconv.LLM_UPSTREAM] == "http://fake.invalid/v1"
