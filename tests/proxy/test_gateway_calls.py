"""The gateway with real clients: exact token ids and logprobs recorded, the agent sees plain OpenAI."""

from __future__ import annotations

import json

import httpx
import pytest
from conftest import SERVED, Env
from langchain_openai import ChatOpenAI

from lightningstore import LLM, semconv
from lightningstore.auth import agent_key

QUESTION = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "What is 12 plus 7?"},
]
TOLERANCE = 1e-3


def assert_exact(env: Env, attributes: dict, text: str) -> None:
    """The stored ids decode to the text the client got; the logprobs match a plain forward pass."""
    prompt_ids = attributes[semconv.LLM_PROMPT_TOKEN_IDS]
    response_ids = attributes[semconv.LLM_RESPONSE_TOKEN_IDS]
    logprobs = attributes[semconv.LLM_RESPONSE_LOGPROBS]
    assert response_ids and env.reference.decode(response_ids) == text
    assert attributes[semconv.LLM_RESPONSE_TEXT] == text
    assert len(logprobs) == len(response_ids)
    recomputed = env.reference.logprobs(prompt_ids, response_ids)
    assert max(abs(a - b) for a, b in zip(logprobs, recomputed, strict=True)) < TOLERANCE


async def test_chat_is_recorded_with_exact_token_ids_and_logprobs(env: Env) -> None:
    claimed = await env.attempt()
    client = env.client(
        claimed, default_headers={"X-LightningRL-Agent-Name": "solver", "X-LightningRL-Decision": "plan"}
    )
    reply = await client.chat.completions.create(model="whatever-the-agent-says", messages=QUESTION, seed=3)
    text = reply.choices[0].message.content or ""
    # The agent sees a plain OpenAI response: no vLLM token fields, no logprobs it did not ask for.
    assert reply.choices[0].logprobs is None
    assert "token_ids" not in (reply.choices[0].model_extra or {})
    assert "prompt_token_ids" not in (reply.model_extra or {})
    assert reply.model == SERVED

    (span,) = await env.spans(claimed)
    attributes = span.attributes
    assert_exact(env, attributes, text)
    assert attributes[semconv.LLM_PROMPT_TOKEN_IDS] == env.reference.chat_ids(QUESTION)
    assert span.name == semconv.LLM_SPAN_NAME and span.status.status_code == "OK"
    assert span.end_time >= span.start_time
    assert attributes[semconv.GEN_AI_OPERATION] == "chat"
    assert attributes[semconv.GEN_AI_REQUEST_MODEL] == SERVED
    assert attributes[semconv.GEN_AI_MAX_TOKENS] == 12  # the resource's default filled the gap
    assert attributes[semconv.GEN_AI_OUTPUT_TOKENS] == len(attributes[semconv.LLM_RESPONSE_TOKEN_IDS])
    assert attributes[semconv.GEN_AI_INPUT_TOKENS] == len(attributes[semconv.LLM_PROMPT_TOKEN_IDS])
    assert attributes[semconv.GEN_AI_FINISH_REASONS] == [reply.choices[0].finish_reason]
    assert json.loads(attributes[semconv.LLM_REQUEST_MESSAGES]) == QUESTION
    assert attributes[semconv.LLM_TRAINABLE] is True
    assert attributes[semconv.LLM_RESOURCE_VERSION] == env.version_id
    assert attributes[semconv.LLM_UPSTREAM] in env.endpoints
    assert attributes[semconv.LLM_RETRIES] == 0 and attributes[semconv.LLM_LATENCY_MS] > 0
    assert attributes[semconv.AGENT_NAME] == "solver"
    assert attributes[semconv.DECISION] == "plan"  # the agent's baseline key for this call
    assert attributes[semconv.ROLLOUT_ID] == claimed.rollout_id
    assert semconv.LLM_CHOICES not in attributes


async def test_completions_and_several_choices_are_recorded(env: Env) -> None:
    # n > 1 is refused unless the LLM resource allows it (`max_n`, 1 by default).
    several = await env.store.add_resources(
        {"llm": LLM(endpoints=env.endpoints, model=SERVED, sampling={"max_tokens": 12}, max_n=2)}
    )
    claimed = await env.attempt(several.resources_id)
    client = env.client(claimed)
    reply = await client.completions.create(model=SERVED, prompt="The cat sat on", max_tokens=6, n=2, seed=1)
    (span,) = await env.spans(claimed)
    attributes = span.attributes
    assert span.name == "text_completion" and attributes[semconv.GEN_AI_OPERATION] == "text_completion"
    assert_exact(env, attributes, reply.choices[0].text)
    choices = json.loads(attributes[semconv.LLM_CHOICES])
    assert [c["text"] for c in choices] == [c.text for c in reply.choices]
    prompt_ids = attributes[semconv.LLM_PROMPT_TOKEN_IDS]
    for choice in choices:
        assert env.reference.decode(choice["token_ids"]) == choice["text"]
        recomputed = env.reference.logprobs(prompt_ids, choice["token_ids"])
        assert max(abs(a - b) for a, b in zip(choice["logprobs"], recomputed, strict=True)) < TOLERANCE
    assert reply.choices[0].logprobs is None


async def test_token_ids_and_logprobs_reach_an_agent_that_asks(env: Env) -> None:
    claimed = await env.attempt()
    reply = await env.client(claimed).chat.completions.create(
        model=SERVED, messages=QUESTION, logprobs=True, extra_body={"return_token_ids": True}
    )
    (span,) = await env.spans(claimed)
    assert reply.choices[0].model_extra["token_ids"] == span.attributes[semconv.LLM_RESPONSE_TOKEN_IDS]
    assert reply.model_extra["prompt_token_ids"] == span.attributes[semconv.LLM_PROMPT_TOKEN_IDS]
    assert [t.logprob for t in reply.choices[0].logprobs.content] == span.attributes[
        semconv.LLM_RESPONSE_LOGPROBS
    ]


@pytest.mark.parametrize(
    ("mode", "asked", "recorded"),
    [("val", 0.9, 0.7), ("test", None, 0.0), ("train", 0.7, 1.0), ("train", None, 1.0)],
)
async def test_sampling_follows_the_mode(
    env: Env, mode: str, asked: float | None, recorded: float | None
) -> None:
    claimed = await env.attempt(mode=mode)
    extra = {} if asked is None else {"temperature": asked}
    await env.client(claimed, mode).chat.completions.create(
        model=SERVED, messages=QUESTION, max_tokens=4, **extra
    )
    (span,) = await env.spans(claimed)
    assert span.attributes.get(semconv.GEN_AI_TEMPERATURE) == recorded
    assert span.attributes[semconv.GEN_AI_MAX_TOKENS] == 4  # the agent's own value beats the default


async def test_langchain_chat_openai_through_the_proxy(env: Env) -> None:
    claimed = await env.attempt()
    key = agent_key("agent-secret-for-tests", claimed.rollout_id, claimed.attempt_id)
    llm = ChatOpenAI(
        base_url=env.base_url(claimed.rollout_id, claimed.attempt_id),
        api_key=key,
        model="gpt-4o",
        max_tokens=8,
    )
    message = await llm.ainvoke("Say something short.")
    (span,) = await env.spans(claimed)
    assert_exact(env, span.attributes, message.content)
    assert json.loads(span.attributes[semconv.LLM_REQUEST_MESSAGES]) == [
        {"role": "user", "content": "Say something short."}
    ]


async def test_chat_stream_passes_through_and_is_recorded_before_done(env: Env) -> None:
    claimed = await env.attempt()
    stream = await env.client(claimed).chat.completions.create(
        model=SERVED, messages=QUESTION, max_tokens=10, stream=True, stream_options={"include_usage": True}
    )
    pieces, chunks, usage = [], 0, None
    async for chunk in stream:
        chunks += 1
        usage = chunk.usage or usage
        for choice in chunk.choices:
            assert "token_ids" not in (choice.model_extra or {}) and choice.logprobs is None
            pieces.append(choice.delta.content or "")
    # The span is stored before [DONE] reached the client: no waiting here.
    (span,) = await env.spans(claimed)
    assert chunks > 3 and usage is not None
    assert_exact(env, span.attributes, "".join(pieces))
    assert span.attributes[semconv.LLM_PROMPT_TOKEN_IDS] == env.reference.chat_ids(QUESTION)
    assert span.attributes[semconv.GEN_AI_OUTPUT_TOKENS] == usage.completion_tokens


async def test_completion_stream_is_recorded(env: Env) -> None:
    claimed = await env.attempt()
    stream = await env.client(claimed).completions.create(
        model=SERVED, prompt="Once upon", max_tokens=8, stream=True
    )
    text = "".join([chunk.choices[0].text async for chunk in stream if chunk.choices])
    (span,) = await env.spans(claimed)
    assert_exact(env, span.attributes, text)


async def test_models_lists_the_rollouts_model(env: Env) -> None:
    claimed = await env.attempt()
    models = await env.client(claimed).models.list()
    assert [m.id for m in models.data] == [SERVED]


async def test_a_rollout_without_resources_uses_the_approved_llm(env: Env) -> None:
    claimed = await env.attempt(resources_id=None)
    await env.client(claimed).chat.completions.create(model=SERVED, messages=QUESTION, max_tokens=3)
    (span,) = await env.spans(claimed)
    assert span.attributes[semconv.LLM_RESOURCE_VERSION] == env.version_id


async def test_traceparent_joins_the_agents_trace(env: Env) -> None:
    claimed = await env.attempt()
    trace_id, parent = "ab" * 16, "cd" * 8
    key = agent_key("agent-secret-for-tests", claimed.rollout_id, claimed.attempt_id)
    async with httpx.AsyncClient(base_url=env.base_url(claimed.rollout_id, claimed.attempt_id)) as http:
        response = await http.post(
            "/chat/completions",
            json={"messages": QUESTION, "max_tokens": 2},
            headers={"Authorization": f"Bearer {key}", "traceparent": f"00-{trace_id}-{parent}-01"},
        )
    assert response.status_code == 200
    (span,) = await env.spans(claimed)
    assert (span.trace_id, span.parent_id, span.kind) == (trace_id, parent, "CLIENT")
