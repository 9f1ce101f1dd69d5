"""One request/response pair, recorded by the proxy and by `instrument_openai`, gives the same LLM span."""

from __future__ import annotations

import uuid
from typing import Any

import openai
from conftest import Env

from lightningstore import LLM, semconv
from runner import AgentResources, Runner, rollout
from runner.instrument import instrument_openai, uninstrument_openai

REQUEST: dict[str, Any] = {
    "model": "stub-model",
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "héllo"}],
    "temperature": 0.5,
    "top_p": 0.9,
    "max_tokens": 7,
}
# Who called and how: these differ by construction (the proxy knows the resource version, the retries, ...).
CONTEXT_KEYS = {
    semconv.ROLLOUT_ID,
    semconv.ATTEMPT_ID,
    semconv.AGENT_NAME,
    semconv.DECISION,
    semconv.LLM_UPSTREAM,
    semconv.LLM_RETRIES,
    semconv.LLM_LATENCY_MS,
    semconv.LLM_RESOURCE_VERSION,
}


def call_view(span: Any) -> tuple[str, dict[str, Any]]:
    """The span's name and its LLM-call attributes (lists as lists, whichever path stored them)."""
    attributes = {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in span.attributes.items()
        if key not in CONTEXT_KEYS
    }
    return span.name, attributes


async def proxied_span(env: Env, resources_id: str) -> Any:
    claimed = await env.attempt(resources_id)
    try:
        await env.client(claimed, max_retries=0).chat.completions.create(**REQUEST)
    except openai.APIStatusError:
        pass  # a scripted upstream failure: the span is what is compared
    (span,) = await env.spans(claimed)
    return span


async def instrumented_span(env: Env, resources_id: str) -> Any:
    @rollout
    async def agent(task: str, resources: AgentResources) -> float:
        async with openai.AsyncOpenAI(base_url=f"{env.stub.url}/v1", api_key="x", max_retries=0) as client:
            await client.chat.completions.create(**REQUEST)
        return 1.0

    rollout_id = f"parity-{uuid.uuid4().hex[:8]}"
    await env.store.enqueue_rollout("parity", rollout_id=rollout_id, resources_id=resources_id)
    instrument_openai(request_token_ids=True)
    try:
        await Runner(env.store, agent, workers=1, show_progress=False).run(max_rollouts=1)
    finally:
        uninstrument_openai()
    (span,) = await env.store.query_spans(rollout_id, name=semconv.LLM_SPAN_NAME)
    return span


async def test_a_call_gives_the_same_llm_span_through_the_proxy_and_the_instrumentation(env: Env) -> None:
    resources = await env.store.add_resources(
        {"llm": LLM(endpoints=[f"{env.stub.url}/v1"], model="stub-model", respect_agent_sampling=["train"])}
    )

    proxied = call_view(await proxied_span(env, resources.resources_id))
    instrumented = call_view(await instrumented_span(env, resources.resources_id))

    assert proxied == instrumented
    name, attributes = proxied
    assert name == semconv.LLM_SPAN_NAME
    assert attributes[semconv.LLM_PROMPT_TOKEN_IDS] == [1, 2]
    assert attributes[semconv.LLM_RESPONSE_TOKEN_IDS] == [5, 6, 7]
    assert attributes[semconv.LLM_RESPONSE_LOGPROBS] == [-0.5, -0.5, -0.5]
    assert attributes[semconv.LLM_TRAINABLE] is True
    assert attributes[semconv.GEN_AI_MAX_TOKENS] == 7 and attributes[semconv.GEN_AI_TOP_P] == 0.9
    assert attributes[semconv.LLM_RESPONSE_TEXT] == "stub answer"


async def test_a_failed_call_is_recorded_alike_and_not_trainable(env: Env) -> None:
    resources = await env.store.add_resources(
        {"llm": LLM(endpoints=[f"{env.stub.url}/v1"], model="stub-model", respect_agent_sampling=["train"])}
    )

    env.stub.app.state.fail = [400]
    proxied_span_ = await proxied_span(env, resources.resources_id)
    env.stub.app.state.fail = [400]
    instrumented_span_ = await instrumented_span(env, resources.resources_id)

    assert proxied_span_.status.status_code == instrumented_span_.status.status_code == "ERROR"
    assert call_view(proxied_span_) == call_view(instrumented_span_)
    assert call_view(proxied_span_)[1][semconv.LLM_TRAINABLE] is False
