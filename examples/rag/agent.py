"""The retrieval agent: an OpenAI Agents SDK `Agent` with two `@function_tool`s, BM25 searches of a corpus.

It imports nothing from LightningRL but `emit_reward`. It points the SDK at the model it is given
(`resources.llm.base_url`, through `OpenAIChatCompletionsModel`), turns the SDK's tracing export off
(nothing is sent to a hosted service), and runs at most `MAX_TURNS` model calls: one per search, then
the answer. Its reward is the exact match of the final answer with the gold answer; it also records
the answer's token F1 (`f1`) and judges its own answer call: did it copy the fact of the last sentence
it retrieved? (as examples/calc does: a faithful answer is then not blamed for a bad search).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import httpx
from agents import (
    Agent,
    FunctionTool,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.exceptions import AgentsException
from openai import AsyncOpenAI

from runner import emit_reward

try:  # when run from examples/rag as a script directory
    from tasks import NATURAL_SYSTEM, SYSTEM, TOOL_DESCRIPTIONS, World, exact_match, f1, last_word, world_for
except ImportError:  # pragma: no cover - imported as a package
    from examples.rag.tasks import (
        NATURAL_SYSTEM,
        SYSTEM,
        TOOL_DESCRIPTIONS,
        World,
        exact_match,
        f1,
        last_word,
        world_for,
    )

set_tracing_disabled(True)  # the SDK would otherwise export its traces to OpenAI's platform

MAX_TURNS = 4
"""Model calls per question at most: two searches and the answer need three."""
MAX_TOKENS = 32
NATURAL_MAX_TOKENS = 64
"""A real model's `<tool_call>` block with its JSON is ~30 tokens."""

_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()


def shared_http() -> httpx.AsyncClient:
    """One connection pool per event loop for every rollout's client (a fresh one costs ~10 ms of CPU)."""
    loop = asyncio.get_running_loop()
    client = _POOLS.get(loop)
    if client is None:
        client = _POOLS[loop] = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=None))
    return client


def search_tools(world: World, log: list[tuple[str, str, str]] | None = None) -> list[FunctionTool]:
    """The agent's tools: one BM25 search per collection of `world`; each (collection, query, result)
    is appended to `log`."""

    def run(collection: str, query: str) -> str:
        result = world.search(collection, query)
        if log is not None:
            log.append((collection, query, result))
        return result

    @function_tool(description_override=TOOL_DESCRIPTIONS["companies"])
    def search_companies(query: str) -> str:
        return run("companies", query)

    @function_tool(description_override=TOOL_DESCRIPTIONS["people"])
    def search_people(query: str) -> str:
        return run("people", query)

    return [search_companies, search_people]


async def answer(
    llm: Any, question: str, world: World, *, instructions: str = SYSTEM, max_tokens: int = MAX_TOKENS
) -> tuple[str | None, list[tuple[str, str, str]], int]:
    """Run the agent on `question`: (final answer or None when it failed, its searches, its model calls)."""
    searches: list[tuple[str, str, str]] = []
    client = AsyncOpenAI(
        base_url=llm.base_url, api_key=llm.api_key, max_retries=2, timeout=60, http_client=shared_http()
    )
    agent = Agent(
        name="rag",
        instructions=instructions,
        tools=search_tools(world, searches),
        model=OpenAIChatCompletionsModel(model=llm.model, openai_client=client),
        model_settings=ModelSettings(max_tokens=max_tokens),
    )
    try:
        result = await Runner.run(
            agent, question, max_turns=MAX_TURNS, run_config=RunConfig(tracing_disabled=True)
        )
    except AgentsException:  # too many turns, an unknown tool: a failed answer
        return None, searches, len(searches) + 1
    return str(result.final_output).strip(), searches, len(result.raw_responses)


async def rag_agent(task: dict[str, Any], resources: Any) -> float:
    """The toy model's form: instructions that ask it to name the relation and collection first."""
    return rewarded(task, *await answer(resources.llm, task["question"], world_for(task["world"])))


async def rag_natural_agent(task: dict[str, Any], resources: Any) -> float:
    """The same agent as a user writes it for a real model: plain instructions (`NATURAL_SYSTEM`), room
    for a `<tool_call>` block (examples/rag/demo_smollm2.py)."""
    world = world_for(task["world"])
    outcome = await answer(
        resources.llm, task["question"], world, instructions=NATURAL_SYSTEM, max_tokens=NATURAL_MAX_TOKENS
    )
    return rewarded(task, *outcome)


def rewarded(
    task: dict[str, Any], prediction: str | None, searches: list[tuple[str, str, str]], calls: int
) -> float:
    """Emit the run's step rewards; return the episode's (exact match)."""
    if prediction is None:
        emit_reward(0.0, name="f1")
        return 0.0
    if searches:  # the answer call copies the fact of the last sentence it read
        copied = exact_match(prediction, last_word(searches[-1][2]))
        emit_reward(copied, step=calls - 1)
    emit_reward(f1(prediction, task["answer"]), name="f1")
    return exact_match(prediction, task["answer"])
