"""The gateway's security: an agent cannot redirect a provider call, and an ended attempt sends nothing upstream."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from conftest import SECRET, SERVED, TOKENS, Live, serve, stub_upstream
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from openai import AsyncOpenAI

from lightningstore import LLM, AttemptedRollout, RolloutConfig, SqlStore
from lightningstore.auth import TokenConfig, agent_key
from lightningstore.proxy import ProxyConfig
from lightningstore.server import build_app

HI = [{"role": "user", "content": "hi"}]
VENDOR_KEY = "server-side-deepseek-key"
"""The store server's own credential for the hosted vendor (litellm reads it from the environment)."""


def recording_vendor() -> FastAPI:
    """A loopback server answering OpenAI-shaped chat completions, remembering every request it got."""
    app = FastAPI()
    app.state.requests = []  # (authorization header, body) per request
    app.state.fail = []  # statuses to answer with, one per call, before succeeding

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(request: Request) -> Response:
        body = orjson.loads(await request.body())
        app.state.requests.append((request.headers.get("authorization"), body))
        if app.state.fail:
            status = app.state.fail.pop(0)
            return JSONResponse({"error": {"message": f"vendor refused: {status}"}}, status)
        message = {"role": "assistant", "content": "vendor answer"}
        return JSONResponse(
            {
                "id": "chatcmpl-vendor",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
            }
        )

    return app


@dataclass
class Stack:
    """The store server with its proxy, and the servers its calls may reach."""

    url: str
    store: SqlStore
    hosted_vendor: Live
    """Stands in for a hosted LLM vendor, reached through litellm's `deepseek` provider."""
    attacker: Live
    """A URL an agent would like the server's vendor key sent to."""
    upstream: Live
    """An OpenAI-compatible backend (the trained kind) that counts its calls."""
    hosted_id: str
    trained_id: str

    def base_url(self, claimed: AttemptedRollout) -> str:
        return f"{self.url}/proxy/rollout/{claimed.rollout_id}/attempt/{claimed.attempt_id}/mode/train/v1"

    def client(self, claimed: AttemptedRollout) -> AsyncOpenAI:
        key = agent_key(SECRET, claimed.rollout_id, claimed.attempt_id)
        return AsyncOpenAI(base_url=self.base_url(claimed), api_key=key, max_retries=0)

    async def post(self, claimed: AttemptedRollout, body: dict[str, Any]) -> httpx.Response:
        key = agent_key(SECRET, claimed.rollout_id, claimed.attempt_id)
        async with httpx.AsyncClient(timeout=30) as http:
            return await http.post(
                f"{self.base_url(claimed)}/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
            )

    @property
    def vendor_requests(self) -> list[tuple[str | None, dict[str, Any]]]:
        return self.hosted_vendor.app.state.requests

    @property
    def attacker_requests(self) -> list[tuple[str | None, dict[str, Any]]]:
        return self.attacker.app.state.requests


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEEPSEEK_API_KEY", VENDOR_KEY)
        patch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        vendor, attacker, upstream = (
            serve(recording_vendor(), "fake-hosted-vendor"),
            serve(recording_vendor(), "attacker"),
            serve(stub_upstream(), "counting-upstream"),
        )
        store = SqlStore(Path(tmp_path_factory.mktemp("security")) / "store.db")
        tokens = TokenConfig.from_mapping({**TOKENS, "agent_secret": SECRET})
        config = ProxyConfig(backoff_base_s=0.01, backoff_max_s=0.05)
        app = build_app(store, tokens=tokens, proxy=config, sweep_interval=None)
        hosted = LLM(endpoints=[f"{vendor.url}/v1"], model="hosted-model", provider="deepseek")
        trained = LLM(endpoints=[f"{upstream.url}/v1"], model=SERVED)
        hosted_set = asyncio.run(store.add_resources({"llm": hosted}))
        trained_set = asyncio.run(store.add_resources({"llm": trained}))
        server = serve(app, "store-server")
        yield Stack(
            server.url,
            store,
            vendor,
            attacker,
            upstream,
            hosted_set.resources_id,
            trained_set.resources_id,
        )
        for live in (server, vendor, attacker, upstream):
            live.stop()


# ---- an agent cannot redirect a provider call -------------------------------------------------


async def test_base_url_in_the_body_reaches_no_one_and_is_refused_by_name(stack: Stack) -> None:
    claimed = await stack.store.start_rollout({"task": "t"}, resources_id=stack.hosted_id)
    before = len(stack.vendor_requests)
    refused = await stack.post(claimed, {"messages": HI, "base_url": f"{stack.attacker.url}/v1"})
    assert stack.attacker_requests == [], "the server's vendor key went to the URL the agent named"
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == "base_url" and "base_url" in error["message"]
    assert stack.attacker_requests == [] and len(stack.vendor_requests) == before

    # The same through the OpenAI SDK's extra_body: the agent gets its usual typed error.
    with pytest.raises(openai.BadRequestError, match="base_url"):
        await stack.client(claimed).chat.completions.create(
            model="any", messages=HI, extra_body={"base_url": f"{stack.attacker.url}/v1"}
        )
    assert stack.attacker_requests == []

    # A plain body goes to the hosted vendor, with the server's key.
    reply = await stack.client(claimed).chat.completions.create(model="any", messages=HI)
    assert reply.choices[0].message.content == "vendor answer"
    authorization, body = stack.vendor_requests[-1]
    assert authorization == f"Bearer {VENDOR_KEY}" and body["model"] == "hosted-model"
    assert stack.attacker_requests == []


@pytest.mark.parametrize(
    "key",
    [
        "api_base",
        "api_key",
        "api_version",
        "organization",
        "headers",
        "extra_headers",
        "custom_llm_provider",
        "aws_secret_access_key",
        "litellm_params",
    ],
)
async def test_every_connection_or_credential_key_is_refused_naming_it(stack: Stack, key: str) -> None:
    claimed = await stack.store.start_rollout({"task": "t"}, resources_id=stack.hosted_id)
    before = len(stack.vendor_requests)
    refused = await stack.post(claimed, {"messages": HI, key: f"{stack.attacker.url}/v1"})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == key, refused.text
    assert stack.attacker_requests == [] and len(stack.vendor_requests) == before


async def test_a_key_outside_openais_parameters_is_refused_for_a_provider(stack: Stack) -> None:
    claimed = await stack.store.start_rollout({"task": "t"}, resources_id=stack.hosted_id)
    before = len(stack.vendor_requests)
    for key, value in (("mock_response", "forged answer"), ("extra_body", {"x": 1}), ("num_retries", 9)):
        refused = await stack.post(claimed, {"messages": HI, key: value})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["param"] == key and key in refused.json()["error"]["message"]
    assert len(stack.vendor_requests) == before


async def test_what_agent_frameworks_send_still_reaches_the_vendor(stack: Stack) -> None:
    """LangChain and AutoGen stream with `stream_options`; the Agents SDK sends `store`, `metadata`."""
    claimed = await stack.store.start_rollout({"task": "t"}, resources_id=stack.hosted_id)
    stream = await stack.client(claimed).chat.completions.create(
        model="any",
        messages=HI,
        stream=True,
        stream_options={"include_usage": True},
        store=False,
        metadata={"run": "r1"},
        temperature=0.2,
        extra_body={"return_token_ids": True},
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "vendor answer"
    _, body = stack.vendor_requests[-1]
    assert body["temperature"] == 0.2
    assert not {"store", "metadata", "stream_options", "return_token_ids"} & body.keys()


async def test_a_provider_failure_is_a_short_502(stack: Stack) -> None:
    claimed = await stack.store.start_rollout({"task": "t"}, resources_id=stack.hosted_id)
    stack.hosted_vendor.app.state.fail = [401]
    failed = await stack.post(claimed, {"messages": HI})
    assert failed.status_code == 502, failed.text
    message = failed.json()["error"]["message"]
    assert "answered 401" in message and "'deepseek'" in message
    assert "\n" not in message and "Traceback" not in message and len(message) < 500
    assert VENDOR_KEY not in failed.text


async def test_an_openai_compatible_backend_is_not_redirected_either(stack: Stack) -> None:
    claimed = await stack.store.start_rollout({"task": "t"}, resources_id=stack.trained_id)
    before = stack.upstream.app.state.calls
    refused = await stack.post(claimed, {"messages": HI, "base_url": f"{stack.attacker.url}/v1"})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "base_url"
    assert stack.upstream.app.state.calls == before and stack.attacker_requests == []
    # Such servers take sampling keys beyond OpenAI's (vLLM's top_k): those still go through.
    assert (await stack.post(claimed, {"messages": HI, "top_k": 5})).status_code == 200
    assert stack.upstream.app.state.bodies[-1]["top_k"] == 5


# ---- an ended or superseded attempt sends nothing upstream -----------------------------------


async def test_an_ended_attempt_sends_no_prompt_upstream(stack: Stack) -> None:
    claimed = await stack.store.start_rollout({"task": "t"}, resources_id=stack.trained_id)
    client = stack.client(claimed)
    await client.chat.completions.create(model=SERVED, messages=HI)  # keeps a connection open upstream
    calls = stack.upstream.app.state.calls
    await stack.store.update_attempt(claimed.rollout_id, claimed.attempt_id, status="succeeded")
    for stream in (False, True, False):
        with pytest.raises(openai.ConflictError, match="already ended"):
            await client.chat.completions.create(model=SERVED, messages=HI, stream=stream)
    await asyncio.sleep(0.2)  # a request sent regardless would have landed by now
    assert stack.upstream.app.state.calls == calls


async def test_a_superseded_or_unknown_attempt_sends_no_prompt_upstream(stack: Stack) -> None:
    config = RolloutConfig(max_attempts=2, retry_on=["failed"])
    first = await stack.store.start_rollout({"task": "t"}, resources_id=stack.trained_id, config=config)
    await stack.client(first).chat.completions.create(model=SERVED, messages=HI)
    await stack.store.update_attempt(first.rollout_id, first.attempt_id, status="failed")
    second = await stack.store.start_attempt(first.rollout_id)
    calls = stack.upstream.app.state.calls
    for _ in range(3):
        with pytest.raises(openai.ConflictError, match="already ended"):
            await stack.client(first).chat.completions.create(model=SERVED, messages=HI)
    async with httpx.AsyncClient() as http:
        url = f"{stack.url}/proxy/rollout/{first.rollout_id}/attempt/at-nope/mode/train/v1/chat/completions"
        unknown = await http.post(
            url, json={"messages": HI}, headers={"Authorization": f"Bearer {TOKENS['runner']}"}
        )
    assert unknown.status_code == 404
    await asyncio.sleep(0.2)
    assert stack.upstream.app.state.calls == calls
    await stack.client(second).chat.completions.create(model=SERVED, messages=HI)
    assert stack.upstream.app.state.calls == calls + 1
