"""The calculator agent: plain `openai` client, two model calls per task (pick a tool, then answer).

It imports nothing from LightningRL but `emit_reward`: it receives its model's base_url and key and
returns its reward (1.0 when the final answer is right). It also judges its own second call: did
the answer restate the tool's result? That step reward is what keeps a faithful answer from being
blamed when the first call picked the wrong tool (see examples/calc/README.md).
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import Callable
from typing import Any

import httpx
from openai import AsyncOpenAI

from runner import emit_reward

try:  # when run from examples/calc as a script directory
    from tasks import (
        SYSTEM,
        TOOL_SCHEMAS,
        TOOL_SYSTEM,
        answer_messages,
        function_result,
        run_tool,
        tool_messages,
    )
except ImportError:  # pragma: no cover - imported as a package
    from examples.calc.tasks import (
        SYSTEM,
        TOOL_SCHEMAS,
        TOOL_SYSTEM,
        answer_messages,
        function_result,
        run_tool,
        tool_messages,
    )

ANSWER_CALL = 1
"""0-based index of the answer call among the agent's LLM calls."""


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()


def shared_http() -> httpx.AsyncClient:
    """One connection pool per event loop for every rollout's client, as OpenAI's docs advise.

    A fresh `AsyncOpenAI()` per rollout builds a new httpx client and TLS context (~10 ms of CPU):
    measured, that was half of a runner process's time in this demo."""
    loop = asyncio.get_running_loop()
    client = _POOLS.get(loop)
    if client is None:
        client = _POOLS[loop] = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=None))
    return client


async def solve(
    llm: Any, question: str, tool: Callable[[str], str] = run_tool, system: str = SYSTEM
) -> tuple[str, str, str]:
    """The agent's two model calls: (tool call, the tool's result, the final answer)."""
    client = AsyncOpenAI(
        base_url=llm.base_url, api_key=llm.api_key, max_retries=2, timeout=60, http_client=shared_http()
    )
    first = await client.chat.completions.create(
        model=llm.model, messages=tool_messages(question, system), max_tokens=10
    )
    tool_call = (first.choices[0].message.content or "").strip()
    result = tool(tool_call)
    second = await client.chat.completions.create(
        model=llm.model, messages=answer_messages(question, tool_call, result, system), max_tokens=6
    )
    return tool_call, result, (second.choices[0].message.content or "").strip()


async def calc_agent(task: dict[str, Any], resources: Any) -> float:
    """Both calls under the system prompt: the `prompt` resource when the rollout has one (APO)."""
    prompt = resources.prompts.get("prompt")
    _, result, answer = await solve(
        resources.llm, task["question"], system=prompt.template if prompt is not None else SYSTEM
    )
    emit_reward(1.0 if answer == result else 0.0, step=ANSWER_CALL)
    return 1.0 if answer == str(task["answer"]) else 0.0


async def solve_with_tools(
    llm: Any, question: str, system: str = TOOL_SYSTEM
) -> tuple[str | None, str | None, str]:
    """The agent in its natural form: the tools offered as functions, the model's tool call executed,
    its result sent back as a `tool` message, then the final answer: (call, result, answer)."""
    client = AsyncOpenAI(
        base_url=llm.base_url, api_key=llm.api_key, max_retries=2, timeout=120, http_client=shared_http()
    )
    messages: list[dict[str, Any]] = tool_messages(question, system)
    first = await client.chat.completions.create(
        model=llm.model, messages=messages, tools=TOOL_SCHEMAS, max_tokens=40
    )
    message = first.choices[0].message
    if not message.tool_calls:
        return None, None, (message.content or "").strip()
    call = message.tool_calls[0]
    result = function_result(call.function.name, call.function.arguments)
    messages += [
        {"role": "assistant", "content": message.content, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": result},
    ]
    second = await client.chat.completions.create(
        model=llm.model, messages=messages, tools=TOOL_SCHEMAS, max_tokens=12
    )
    return call.function.name, result, (second.choices[0].message.content or "").strip()


def last_number(text: str) -> str | None:
    numbers = re.findall(r"-?\d+", text)
    return numbers[-1] if numbers else None


async def calc_tools_agent(task: dict[str, Any], resources: Any) -> float:
    """Reward 1.0 when the reply's last number is the answer; the answer call is judged on restating
    the tool's result (as `calc_agent`'s)."""
    _, result, answer = await solve_with_tools(resources.llm, task["question"])
    if result is not None:
        emit_reward(1.0 if last_number(answer) == result else 0.0, step=ANSWER_CALL)
    return 1.0 if last_number(answer) == str(task["answer"]) else 0.0
