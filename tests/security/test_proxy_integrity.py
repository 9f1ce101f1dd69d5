"""The gateway's sampling comes from the rollout: an agent cannot pick its mode, constrain a train call's
output, or ask for more tokens or choices than its LLM resource allows; the loop drops what it cannot batch.

Every call goes to a real store server (uvicorn on 127.0.0.1, tokens on) with the attempt's own agent key,
in front of a recording OpenAI-compatible upstream: through the fast path (no query string) and through
the FastAPI routes (a query string sends a call there), at our `/v1` and Agent Lightning's `/openai/v1`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from live_model import serve_in_thread

from lightningrl.credit import TrainingSequence, assign_credit, collate
from lightningrl.credit.batch import batchable
from lightningrl.rl.metrics import dropped_sequences_row
from lightningstore import LLM, AttemptedRollout, SqlStore, semconv
from lightningstore.auth import TokenConfig, agent_key
from lightningstore.data.reward import Reward
from lightningstore.data.span import Span
from lightningstore.proxy import ProxyConfig
from lightningstore.server import build_app

SECRET = "integrity-agent-secret"
TOKENS = {"admin": "admin-token", "algorithm": "algo-token", "runner": "runner-token"}
HI = [{"role": "user", "content": "hi"}]
FORMS = ["v1", "openai/v1"]
"""Our base URL's tail and Agent Lightning v1.0's."""
ROUTES = {"fast path": "", "FastAPI route": "?via=router"}
"""A query string makes the fast path hand the call to the FastAPI route."""


def recording_upstream() -> FastAPI:
    """An OpenAI-compatible server answering with token ids and logprobs, remembering every body."""
    app = FastAPI()
    app.state.bodies = []

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(request: Request) -> JSONResponse:
        body = orjson.loads(await request.body())
        app.state.bodies.append(body)
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": "ok"},
            "finish_reason": "stop",
            "logprobs": {"content": [{"token": "ok", "logprob": -0.5, "bytes": [], "top_logprobs": []}]},
            "token_ids": [7],
        }
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [choice],
                "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3},
                "prompt_token_ids": [1, 2],
            }
        )

    return app


@dataclass
class Stack:
    url: str
    store: SqlStore
    upstream: FastAPI
    resources_id: str
    capped_id: str
    """An LLM resource with `max_tokens_cap=64` and `max_n=3`."""

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return self.upstream.state.bodies

    async def rollout(self, mode: str, resources_id: str | None = None) -> AttemptedRollout:
        return await self.store.start_rollout(
            {"task": "t"}, mode=mode, resources_id=resources_id or self.resources_id
        )

    async def call(
        self,
        claimed: AttemptedRollout,
        mode: str,
        body: dict[str, Any],
        *,
        form: str = "v1",
        route: str = "",
        kind: str = "chat/completions",
    ) -> httpx.Response:
        """POST `body` as the attempt's own agent to the gateway URL naming `mode`."""
        key = agent_key(SECRET, claimed.rollout_id, claimed.attempt_id)
        url = (
            f"{self.url}/proxy/rollout/{claimed.rollout_id}/attempt/{claimed.attempt_id}"
            f"/mode/{mode}/{form}/{kind}{route}"
        )
        async with httpx.AsyncClient(timeout=30) as http:
            return await http.post(url, json=body, headers={"Authorization": f"Bearer {key}"})

    async def spans(self, claimed: AttemptedRollout) -> list[Any]:
        return await self.store.query_spans(claimed.rollout_id)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    upstream = recording_upstream()
    upstream_url, upstream_server, upstream_thread = serve_in_thread(upstream, "recording-upstream")
    store = SqlStore(Path(tmp_path_factory.mktemp("integrity")) / "store.db")
    tokens = TokenConfig.from_mapping({**TOKENS, "agent_secret": SECRET})
    app = build_app(store, tokens=tokens, proxy=ProxyConfig(max_retries=0), sweep_interval=None)
    endpoints = [f"{upstream_url}/v1"]
    plain = asyncio.run(store.add_resources({"llm": LLM(endpoints=endpoints, model="tiny")}))
    capped = LLM(endpoints=endpoints, model="tiny", max_tokens_cap=64, max_n=3)
    capped_set = asyncio.run(store.add_resources({"llm": capped}))
    url, server, thread = serve_in_thread(app, "integrity-store-server")
    yield Stack(url, store, upstream, plain.resources_id, capped_set.resources_id)
    for live_server, live_thread in ((server, thread), (upstream_server, upstream_thread)):
        live_server.should_exit = True  # type: ignore[attr-defined]
        live_thread.join(timeout=10)  # type: ignore[attr-defined]


async def assert_refused(
    stack: Stack, claimed: AttemptedRollout, answer: httpx.Response, status: int, *needles: str
) -> dict[str, Any]:
    """`answer` is an OpenAI-shaped `status` error naming every needle; nothing upstream, no span."""
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    for needle in needles:
        assert needle in error["message"], error
    assert [b for b in stack.bodies if b.get("messages") == claimed_marker(claimed)] == []
    assert await stack.spans(claimed) == []
    return error


def claimed_marker(claimed: AttemptedRollout) -> list[dict[str, str]]:
    """Messages unique to one rollout, so the upstream's record shows whether its call went there."""
    return [{"role": "user", "content": f"hi from {claimed.rollout_id}"}]


# ---- finding 2: the rollout's mode, not the URL's ---------------------------------------------


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("route", list(ROUTES.values()), ids=list(ROUTES))
async def test_a_train_rollout_calling_test_mode_is_refused(stack: Stack, form: str, route: str) -> None:
    claimed = await stack.rollout("train")
    body = {"messages": claimed_marker(claimed)}
    answer = await stack.call(claimed, "test", body, form=form, route=route)
    error = await assert_refused(stack, claimed, answer, 409, "train rollout", "mode/train/", "not mode/test")
    assert error["type"] == "conflict_error" and claimed.rollout_id in error["message"]

    # The URL the runner hands out (the rollout's own mode) is served and recorded as trainable.
    served = await stack.call(claimed, "train", body, form=form, route=route)
    assert served.status_code == 200, served.text
    assert stack.bodies[-1]["messages"] == body["messages"] and stack.bodies[-1]["temperature"] == 1.0
    (span,) = await stack.spans(claimed)
    assert span.attributes[semconv.LLM_TRAINABLE] is True
    assert span.attributes[semconv.GEN_AI_TEMPERATURE] == 1.0


@pytest.mark.parametrize(("rollout_mode", "url_mode"), [("val", "train"), ("test", "val"), ("val", "test")])
async def test_an_evaluation_rollout_cannot_pick_another_mode(
    stack: Stack, rollout_mode: str, url_mode: str
) -> None:
    claimed = await stack.rollout(rollout_mode)
    body = {"messages": claimed_marker(claimed)}
    for form in FORMS:
        answer = await stack.call(claimed, url_mode, body, form=form)
        await assert_refused(stack, claimed, answer, 409, f"{rollout_mode} rollout", f"not mode/{url_mode}")
    refused = await stack.call(claimed, url_mode, {"prompt": "x"}, kind="completions")
    await assert_refused(stack, claimed, refused, 409, f"mode/{rollout_mode}/")
    assert (await stack.call(claimed, rollout_mode, body)).status_code == 200
    assert len(await stack.spans(claimed)) == 1


async def test_the_models_list_answers_only_at_the_rollouts_mode(stack: Stack) -> None:
    claimed = await stack.rollout("train")
    key = agent_key(SECRET, claimed.rollout_id, claimed.attempt_id)
    base = f"{stack.url}/proxy/rollout/{claimed.rollout_id}/attempt/{claimed.attempt_id}"
    async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {key}"}) as http:
        assert (await http.get(f"{base}/mode/test/v1/models")).status_code == 409
        listed = await http.get(f"{base}/mode/train/v1/models")
    assert listed.status_code == 200 and listed.json()["data"][0]["id"] == "tiny"


# ---- finding 6: a train call samples the policy's own tokens, within the resource's caps -----------

CONSTRAINTS: dict[str, Any] = {
    "logit_bias": {"7": 100},
    "allowed_token_ids": [7],
    "bad_words": ["no"],
    "min_tokens": 8,
    "structured_outputs": {"choice": ["yes"]},
    "guided_json": {"type": "object"},
    "guided_regex": "yes|no",
    "guided_choice": ["yes"],
    "guided_grammar": 'root ::= "yes"',
    "logits_processors": ["my.processor"],
    "vllm_xargs": {"force": "yes"},
    "best_of": 2,
    "use_beam_search": True,
}
FORMATS = {
    "json_schema": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}},
    "json_object": {"type": "json_object"},
}


@pytest.mark.parametrize(
    ("key", "value"),
    [*CONSTRAINTS.items(), *(("response_format", value) for value in FORMATS.values())],
    ids=[*CONSTRAINTS, *(f"response_format-{name}" for name in FORMATS)],
)
async def test_an_output_constraint_is_refused_in_train_mode_only(stack: Stack, key: str, value: Any) -> None:
    claimed = await stack.rollout("train")
    body = {"messages": claimed_marker(claimed), key: value}
    for form, route in (("v1", ""), ("openai/v1", "?via=router")):
        answer = await stack.call(claimed, "train", body, form=form, route=route)
        error = await assert_refused(stack, claimed, answer, 400, key, "policy's own tokens")
        assert error["param"] == key and error["type"] == "invalid_request_error"

    # A val or test call is not training data: the same key is sent on, as asked.
    capped = key == "best_of"  # within the capped resource's max_n (3); the default allows 1
    for mode in ("val", "test"):
        evaluation = await stack.rollout(mode, stack.capped_id if capped else None)
        answer = await stack.call(evaluation, mode, {"messages": HI, key: value})
        assert answer.status_code == 200, answer.text
        assert stack.bodies[-1][key] == value


async def test_a_train_call_keeps_free_decoding_tools_and_its_own_sampling_keys(stack: Stack) -> None:
    claimed = await stack.rollout("train")
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    allowed = [
        {"response_format": {"type": "text"}},
        {"tools": tools, "tool_choice": "required"},
        {"tools": tools, "tool_choice": {"type": "function", "function": {"name": "add"}}},
        {"logit_bias": None, "min_tokens": 0, "use_beam_search": False},  # client defaults: no constraint
        {"top_k": 5, "max_tokens": 4096, "n": 1},
    ]
    for extra in allowed:
        answer = await stack.call(claimed, "train", {"messages": HI, **extra})
        assert answer.status_code == 200, (extra, answer.text)
        assert all(stack.bodies[-1].get(key) == value for key, value in extra.items()), stack.bodies[-1]
    assert len(await stack.spans(claimed)) == len(allowed)


@pytest.mark.parametrize(
    ("key", "value", "limit"),
    [
        ("n", 2, "limit 1 (max_n)"),
        ("max_tokens", 10**9, "limit 4096 (max_tokens_cap)"),
        ("max_tokens", 1e9, "limit 4096 (max_tokens_cap)"),
        ("max_completion_tokens", 4097, "limit 4096 (max_tokens_cap)"),
    ],
)
@pytest.mark.parametrize("mode", ["train", "val"])
async def test_n_and_max_tokens_above_the_resources_cap_are_refused(
    stack: Stack, key: str, value: Any, limit: str, mode: str
) -> None:
    claimed = await stack.rollout(mode)
    answer = await stack.call(claimed, mode, {"messages": claimed_marker(claimed), key: value})
    error = await assert_refused(stack, claimed, answer, 400, f"{key}={int(value)}", limit)
    assert error["param"] == key


async def test_the_caps_are_the_resources_own(stack: Stack) -> None:
    claimed = await stack.rollout("train", stack.capped_id)
    for key, value, limit in (("max_tokens", 65, "limit 64"), ("n", 4, "limit 3 (max_n)")):
        answer = await stack.call(claimed, "train", {"messages": claimed_marker(claimed), key: value})
        assert (await assert_refused(stack, claimed, answer, 400, limit))["param"] == key
    assert (await stack.call(claimed, "train", {"messages": HI, "max_tokens": 64, "n": 3})).status_code == 200
    assert stack.bodies[-1]["max_tokens"] == 64 and stack.bodies[-1]["n"] == 3


@pytest.mark.parametrize("value", ["1000000000", 12.5, True])
async def test_a_length_that_is_not_an_integer_is_refused(stack: Stack, value: Any) -> None:
    claimed = await stack.rollout("train")
    answer = await stack.call(claimed, "train", {"messages": claimed_marker(claimed), "max_tokens": value})
    assert (await assert_refused(stack, claimed, answer, 422, "max_tokens must be an integer"))["param"] == (
        "max_tokens"
    )


# ---- finding 2, the loop's side: a sequence it cannot batch is dropped and counted -----------------


def sampled_at(rollout_id: str, temperature: float) -> list[TrainingSequence]:
    """One rollout's training sequences, from one LLM span recorded at `temperature`."""
    attributes: dict[str, object] = {
        semconv.LLM_PROMPT_TOKEN_IDS: [1, 5, 6, 9],
        semconv.LLM_RESPONSE_TOKEN_IDS: [11, 40, 77, 2],
        semconv.LLM_RESPONSE_LOGPROBS: [-3.0] * 4,
        semconv.GEN_AI_TEMPERATURE: temperature,
    }
    span = Span(rollout_id=rollout_id, attempt_id="a", trace_id="t", span_id="s", name="chat",
                attributes=attributes, sequence_id=1)  # fmt: skip
    reward = Reward(rollout_id=rollout_id, value=1.0, reward_id=f"w-{rollout_id}", create_time=0.0)
    return assign_credit([span], [reward]).sequences


def test_the_loop_drops_and_counts_sequences_of_another_temperature(caplog: pytest.LogCaptureFixture) -> None:
    sequences = [
        *sampled_at("r1", 1.0),
        *sampled_at("odd-greedy", 0.0),
        *sampled_at("r2", 1.0),
        *sampled_at("odd-warm", 0.7),
    ]
    with pytest.raises(ValueError, match="cannot share one batch"):
        collate(sequences)  # what ended the run
    kept, dropped = batchable(sequences)
    assert [s.rollout_id for s in kept] == ["r1", "r2"]
    assert sorted(s.rollout_id for s in dropped) == ["odd-greedy", "odd-warm"]
    with caplog.at_level(logging.WARNING):
        row = dropped_sequences_row(kept, dropped)
    assert row["update/dropped_sequences"] == 2
    assert "[0.0, 0.7]" in row["update/dropped_reason"] and "batch's 1.0" in row["update/dropped_reason"]
    assert any("dropped 2 training sequences" in r.getMessage() for r in caplog.records)
    batch = collate(kept)
    assert len(batch) == 2 and batch.temperature == 1.0

    # The temperature most sequences share wins; an all-greedy step keeps none; a clean one drops none.
    kept, dropped = batchable([*sampled_at("a", 0.7), *sampled_at("b", 0.7), *sampled_at("c", 1.0)])
    assert [s.rollout_id for s in kept] == ["a", "b"] and [s.rollout_id for s in dropped] == ["c"]
    kept, dropped = batchable(sampled_at("g", 0.0))
    assert kept == [] and len(dropped) == 1
    assert dropped_sequences_row(*batchable(sampled_at("r", 1.0))) == {"update/dropped_sequences": 0}
