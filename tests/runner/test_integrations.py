"""openai, LangChain and AutoGen agents through the real LLM proxy to the tiny-model inference server.

Each test asserts the attempt's complete span set: the proxy's one LLM span per call (exact token ids,
joined to the runner's trace by `traceparent`) plus the steps the integration records, and no second
LLM span for the same call (credit assignment's own `is_llm_span` counts them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from conftest import StoreServer

from lightningrl.credit.calls import is_llm_span
from lightningstore import LLM, Span, SqlStore, semconv
from runner import AgentResources, Runner, agent_name, rollout
from runner.instrument import instrument_openai, uninstrument_openai

QUESTION = "What is 2 plus 2?"


@pytest.fixture
def instrumented() -> Iterator[None]:
    instrument_openai()
    try:
        yield
    finally:
        uninstrument_openai()


async def run_one(
    sql_store: SqlStore, server: StoreServer, inference_url: str, agent: Any, name: str
) -> list[Span]:
    """Run `agent` on one rollout bound to the tiny model through the proxy; the attempt's spans."""
    bound = await sql_store.add_resources(
        {"llm": LLM(endpoints=[inference_url], model="tiny", sampling={"max_tokens": 8})}
    )
    await sql_store.enqueue_rollout(QUESTION, resources_id=bound.resources_id, rollout_id=name)
    runner = Runner(sql_store, agent, workers=1, proxy_url=server.proxy_url, show_progress=False)
    summary = await runner.run(max_rollouts=1)
    assert summary.succeeded == 1, (await sql_store.query_attempts(name))[0].failure_reason
    return await sql_store.query_spans(name)


def check_llm_span(span: Span, root: Span, text: str, agent: str | None) -> None:
    """The proxy's span: exact tokens, the agent's answer, joined under the runner's root span."""
    attributes = span.attributes
    assert span.name == "chat" and span.resource["service.name"] == "lightningstore.proxy"
    assert span.trace_id == root.trace_id and span.parent_id is not None
    assert (
        len(attributes[semconv.LLM_PROMPT_TOKEN_IDS]) > 0
        and len(attributes[semconv.LLM_RESPONSE_TOKEN_IDS]) > 0
    )
    assert len(attributes[semconv.LLM_RESPONSE_LOGPROBS]) == len(attributes[semconv.LLM_RESPONSE_TOKEN_IDS])
    assert attributes[semconv.LLM_RESPONSE_TEXT] == text
    assert attributes[semconv.LLM_TRAINABLE] is True
    assert attributes.get(semconv.AGENT_NAME) == agent


async def test_openai_agent_through_the_proxy(
    sql_store: SqlStore, store_server: StoreServer, inference_url: str, instrumented: None
) -> None:
    answers: list[str] = []

    @rollout(name="solo")
    async def agent(task: str, resources: AgentResources) -> float:
        llm = resources.llm
        async with openai.AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0) as client:
            reply = await client.chat.completions.create(
                model=llm.model, messages=[{"role": "user", "content": task}], **llm.sampling
            )
        answers.append(reply.choices[0].message.content or "")
        return 1.0

    spans = await run_one(sql_store, store_server, inference_url, agent, "openai-proxy")
    assert sorted(s.name for s in spans) == ["chat", "lightningrl.reward", "lightningrl.rollout"]
    root = next(s for s in spans if s.name == "lightningrl.rollout")
    (llm_span,) = [s for s in spans if is_llm_span(s)]
    check_llm_span(llm_span, root, answers[0], "solo")
    assert llm_span.parent_id == root.span_id


async def test_langchain_agent_through_the_proxy(
    sql_store: SqlStore, store_server: StoreServer, inference_url: str, instrumented: None
) -> None:
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    from runner.instrument.langchain import LightningCallbackHandler

    @tool
    def word_count(text: str) -> int:
        """Count the words of a text."""
        return len(text.split())

    answers: list[str] = []

    @rollout
    def agent(task: str, resources: AgentResources) -> dict[str, float]:
        llm = resources.llm
        model = ChatOpenAI(
            base_url=llm.base_url, api_key=llm.api_key, model=llm.model, max_tokens=8, max_retries=0
        )
        chain = ChatPromptTemplate.from_messages([("user", "{question}")]) | model | StrOutputParser()
        config = {"callbacks": [LightningCallbackHandler()]}
        with agent_name("writer"):
            answer = chain.invoke({"question": task}, config=config)
        words = word_count.invoke({"text": answer}, config=config)
        answers.append(answer)
        return {"reward": 1.0, "words": float(words)}

    spans = await run_one(sql_store, store_server, inference_url, agent, "langchain-proxy")
    assert sorted(s.name for s in spans) == [
        "chat",
        "lightningrl.reward",
        "lightningrl.reward",
        "lightningrl.rollout",
        "step.ChatPromptTemplate",
        "step.RunnableSequence",
        "step.StrOutputParser",
        "step.llm.ChatOpenAI",
        "tool.word_count",
    ]
    by_name = {s.name: s for s in spans}
    root = by_name["lightningrl.rollout"]
    (llm_span,) = [s for s in spans if is_llm_span(s)]
    check_llm_span(llm_span, root, answers[0], "writer")
    sequence = by_name["step.RunnableSequence"]
    assert sequence.parent_id == root.span_id
    for child in ("step.ChatPromptTemplate", "step.llm.ChatOpenAI", "step.StrOutputParser"):
        assert by_name[child].parent_id == sequence.span_id
    # the step records its answer as JSON text: exactly the agent's answer, quoted and escaped
    assert (
        answers[0]
        and json.loads(by_name["step.llm.ChatOpenAI"].attributes["lightningrl.trace.result"]) == answers[0]
    )
    assert by_name["tool.word_count"].attributes["lightningrl.trace.result"] == str(len(answers[0].split()))
    assert by_name["step.RunnableSequence"].attributes[semconv.AGENT_NAME] == "writer"


async def test_autogen_agent_through_the_proxy(
    sql_store: SqlStore, store_server: StoreServer, inference_url: str, instrumented: None
) -> None:
    from autogen_agentchat.agents import AssistantAgent

    from runner.instrument.autogen import autogen_model_client, run_autogen

    answers: list[str] = []

    @rollout
    async def agent(task: str, resources: AgentResources) -> float:
        client = autogen_model_client(resources.llm, max_tokens=8)
        assistant = AssistantAgent("assistant", model_client=client, system_message="Answer briefly.")
        with agent_name("assistant"):
            result = await run_autogen(assistant, task)
        await client.close()
        answers.append(str(result.messages[-1].content))
        return 1.0

    spans = await run_one(sql_store, store_server, inference_url, agent, "autogen-proxy")
    # AutoGen's own OpenTelemetry spans (GenAI conventions, on the global provider) join the attempt too
    assert sorted(s.name for s in spans) == [
        "chat",
        "create_agent assistant",
        "invoke_agent assistant",
        "lightningrl.reward",
        "lightningrl.rollout",
        "step.autogen.message",
        "step.autogen.message",
    ]
    root = next(s for s in spans if s.name == "lightningrl.rollout")
    invoke = next(s for s in spans if s.name == "invoke_agent assistant")
    assert invoke.trace_id == root.trace_id and invoke.resource[semconv.ATTEMPT_ID] == root.attempt_id
    (llm_span,) = [s for s in spans if is_llm_span(s)]
    check_llm_span(llm_span, root, answers[0], "assistant")
    messages = sorted(
        (s.attributes[semconv.AGENT_NAME], s.attributes["lightningrl.autogen.message_type"])
        for s in spans
        if s.name == "step.autogen.message"
    )
    assert messages == [("assistant", "TextMessage"), ("user", "TextMessage")]
