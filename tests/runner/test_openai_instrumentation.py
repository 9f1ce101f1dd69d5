"""instrument_openai against the tiny-model inference server: LLM spans with exact token ids and logprobs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from lightningstore import SqlStore, semconv
from runner import AgentResources, Runner, rollout
from runner.instrument import instrument_openai, uninstrument_openai

MESSAGES = [{"role": "user", "content": "What is 2 plus 2?"}]


@pytest.fixture
def instrumented() -> Iterator[None]:
    instrument_openai(request_token_ids=True)
    try:
        yield
    finally:
        uninstrument_openai()


def assert_llm_span(span: Any, body: dict[str, Any], operation: str) -> None:
    """The span carries exactly what the server answered."""
    attributes = span.attributes
    choice = body["choices"][0]
    prompt_ids = body.get("prompt_token_ids") or choice["prompt_token_ids"]
    assert span.name == ("chat" if operation == "chat" else "text_completion") and span.kind == "CLIENT"
    assert attributes[semconv.GEN_AI_OPERATION] == operation
    assert attributes[semconv.GEN_AI_REQUEST_MODEL] == "tiny"
    assert attributes[semconv.LLM_PROMPT_TOKEN_IDS] == prompt_ids and len(prompt_ids) > 0
    assert attributes[semconv.LLM_RESPONSE_TOKEN_IDS] == choice["token_ids"] and len(choice["token_ids"]) > 0
    logprobs = attributes[semconv.LLM_RESPONSE_LOGPROBS]
    assert len(logprobs) == len(choice["token_ids"]) and all(v <= 0.0 for v in logprobs)
    assert attributes[semconv.GEN_AI_INPUT_TOKENS] == len(prompt_ids)
    assert attributes[semconv.GEN_AI_OUTPUT_TOKENS] == len(choice["token_ids"])
    assert attributes[semconv.LLM_TRAINABLE] is True
    assert attributes[semconv.GEN_AI_FINISH_REASONS] == [choice["finish_reason"]]


async def test_sync_and_async_clients_record_token_ids(
    sql_store: SqlStore, inference_url: str, instrumented: None
) -> None:
    bodies: dict[str, list[dict[str, Any]]] = {}

    @rollout
    def sync_agent(task: str, resources: AgentResources) -> float:
        client = openai.OpenAI(base_url=inference_url, api_key="x", max_retries=0, timeout=60)
        chat = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=8, temperature=0.7)
        text = client.completions.create(model="tiny", prompt="The big cat", max_tokens=6, temperature=0.7)
        bodies[task] = [chat.model_dump(), text.model_dump()]
        return 1.0

    @rollout
    async def async_agent(task: str, resources: AgentResources) -> float:
        async with openai.AsyncOpenAI(
            base_url=inference_url, api_key="x", max_retries=0, timeout=60
        ) as client:
            chat = await client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=8)
            text = await client.completions.create(model="tiny", prompt=[5, 6, 7], max_tokens=6)
        bodies[task] = [chat.model_dump(), text.model_dump()]
        return 1.0

    for agent, task in ((sync_agent, "sync"), (async_agent, "async")):
        await sql_store.enqueue_rollout(task, rollout_id=task)
        summary = await Runner(sql_store, agent, workers=1, show_progress=False).run(max_rollouts=1)
        assert summary.succeeded == 1, await sql_store.query_attempts(task)
        spans = await sql_store.query_spans(task)
        assert sorted(s.name for s in spans) == [
            "chat",
            "lightningrl.reward",
            "lightningrl.rollout",
            "text_completion",
        ]
        root = next(s for s in spans if s.name == "lightningrl.rollout")
        chat_span = next(s for s in spans if s.name == "chat")
        text_span = next(s for s in spans if s.name == "text_completion")
        assert chat_span.parent_id == root.span_id and text_span.parent_id == root.span_id
        assert_llm_span(chat_span, bodies[task][0], "chat")
        assert_llm_span(text_span, bodies[task][1], "text_completion")
        assert (
            chat_span.attributes[semconv.LLM_REQUEST_MESSAGES]
            == '[{"role": "user", "content": "What is 2 plus 2?"}]'
        )
        assert (
            chat_span.attributes[semconv.LLM_RESPONSE_TEXT]
            == bodies[task][0]["choices"][0]["message"]["content"]
        )
        assert chat_span.attributes[semconv.LLM_UPSTREAM].rstrip("/") == inference_url
    assert bodies["async"][1]["choices"][0]["prompt_token_ids"] == [5, 6, 7]


async def test_proxy_calls_and_calls_outside_rollouts_are_not_recorded(
    sql_store: SqlStore, inference_url: str, instrumented: None
) -> None:
    root = inference_url.removesuffix("/v1")
    outside = openai.OpenAI(base_url=inference_url, api_key="x", max_retries=0, timeout=60)
    assert outside.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=2).choices

    @rollout
    def via_proxy(task: str, resources: AgentResources) -> float:
        client = openai.OpenAI(
            base_url=f"{root}/proxy/rollout/{resources.rollout_id}/attempt/{resources.attempt_id}/mode/train/v1",
            api_key="x",
            max_retries=0,
        )
        with pytest.raises(openai.NotFoundError):  # no proxy on the inference server: the call is not ours
            client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=2)
        return 1.0

    await sql_store.enqueue_rollout("p", rollout_id="proxy-call")
    assert (
        await Runner(sql_store, via_proxy, workers=1, show_progress=False).run(max_rollouts=1)
    ).succeeded == 1
    assert [s.name for s in await sql_store.query_spans("proxy-call", name="chat")] == []


async def test_failed_call_records_an_error_llm_span(
    sql_store: SqlStore, inference_url: str, instrumented: None
) -> None:
    @rollout
    async def bad(task: str, resources: AgentResources) -> float:
        async with openai.AsyncOpenAI(base_url=inference_url, api_key="x", max_retries=0) as client:
            await client.chat.completions.create(model="tiny", messages=[], max_tokens=2)
        return 1.0

    await sql_store.enqueue_rollout("b", rollout_id="bad-call")
    assert (await Runner(sql_store, bad, workers=1, show_progress=False).run(max_rollouts=1)).failed == 1
    (span,) = await sql_store.query_spans("bad-call", name="chat")
    assert span.status.status_code == "ERROR" and span.events[0].name == "exception"
