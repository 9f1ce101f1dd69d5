"""The calculator agent on AutoGen AgentChat: an `AssistantAgent` whose tools are add, sub and mul.

The model picks a tool by function calling (AutoGen sends `tools=`, the server answers with OpenAI
`tool_calls`), AutoGen executes the call, and with `reflect_on_tool_use=True` asks the model once more
for the final answer. Two variants of the same tools:

- `calc_autogen_agent`: the tools are Python functions (`tools.py`), wrapped by AutoGen as FunctionTools;
- `calc_autogen_mcp_agent`: the same functions served over MCP (`mcp_server.py`, stdio) through an
  `McpWorkbench`, one server per runner process shared by its rollouts.

`calc_autogen_default_agent` is the form for a real model (examples/calc/demo_smollm2.py
`--framework autogen`): AutoGen's defaults, no reflection — one model call picks the tool and its
arguments, AutoGen runs it and the tool's result is the agent's answer.

Like examples/calc it imports nothing from LightningRL but `emit_reward`: it gets its model's
base_url and key, returns 1.0 when the final answer is right, and judges its own answer call
(did it restate the tool's result?) so a faithful answer is not blamed for a wrong tool.
"""

from __future__ import annotations

import asyncio
import re
import sys
import weakref
from pathlib import Path
from typing import Any

import httpx
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import ToolCallExecutionEvent, ToolCallRequestEvent
from autogen_ext.models.openai import OpenAIChatCompletionClient
from autogen_ext.tools.mcp import McpWorkbench, StdioServerParams

from runner import emit_reward

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # tools.py beside this file, however the module was imported
    sys.path.insert(0, str(HERE))

from tools import add, mul, sub  # noqa: E402

SYSTEM = "Name the operation and its tool, call the tool, then reply with its result."
DEFAULT_SYSTEM = "You are a calculator assistant. Call a tool to compute the answer."
"""The system message of `calc_autogen_default_agent`."""
MAX_TOKENS = 40
"""A tool call is ~30 tokens in the word tokenizer; the answer ends after 2-3."""
ANSWER_CALL = 1
"""0-based index of the answer call (the reflection) among the agent's LLM calls."""
MODEL_INFO = {
    "vision": False,
    "function_calling": True,
    "json_output": False,
    "structured_output": False,
    "family": "unknown",
}

_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()
_WORKBENCHES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[McpWorkbench]] = (
    weakref.WeakKeyDictionary()
)


def shared_http() -> httpx.AsyncClient:
    """One connection pool per event loop for every rollout's model client (see examples/calc/agent.py)."""
    loop = asyncio.get_running_loop()
    client = _POOLS.get(loop)
    if client is None:
        client = _POOLS[loop] = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=None))
    return client


def mcp_server_params() -> StdioServerParams:
    return StdioServerParams(
        command=sys.executable, args=[str(HERE / "mcp_server.py")], read_timeout_seconds=60
    )


async def _start_workbench() -> McpWorkbench:
    workbench = McpWorkbench(mcp_server_params())
    await workbench.start()
    return workbench


async def shared_workbench() -> McpWorkbench:
    """One MCP server (and session) per event loop, started by the first rollout that needs it."""
    loop = asyncio.get_running_loop()
    task = _WORKBENCHES.get(loop)
    if task is None:
        task = _WORKBENCHES[loop] = loop.create_task(_start_workbench())
    return await task


def model_client(llm: Any) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(
        model=llm.model,
        base_url=llm.base_url,
        api_key=llm.api_key,
        model_info=MODEL_INFO,
        max_tokens=MAX_TOKENS,
        max_retries=2,
        http_client=shared_http(),
    )


def openai_tools(kind: str) -> list[dict[str, Any]]:
    """The `tools` AutoGen sends with the agent's first call, converted exactly as its client does."""
    from autogen_core.tools import FunctionTool
    from autogen_ext.models.openai._openai_client import convert_tools

    if kind == "python":  # AssistantAgent wraps a function with its docstring as the description
        schemas: list[Any] = [FunctionTool(f, description=f.__doc__ or "") for f in (add, sub, mul)]
    else:

        async def listed() -> list[Any]:
            async with McpWorkbench(mcp_server_params()) as workbench:
                return list(await workbench.list_tools())

        schemas = asyncio.run(listed())
    return [dict(tool) for tool in convert_tools(schemas)]


async def solve(
    llm: Any, question: str, *, mcp: bool = False, system: str = SYSTEM, reflect: bool = True
) -> tuple[str | None, str | None, str]:
    """Run the AssistantAgent once: (tool called, its result, final answer); None when no tool ran."""
    client = model_client(llm)
    tools: dict[str, Any] = {"workbench": await shared_workbench()} if mcp else {"tools": [add, sub, mul]}
    assistant = AssistantAgent(
        "calculator", model_client=client, system_message=system, reflect_on_tool_use=reflect, **tools
    )
    result = await assistant.run(task=question)
    tool = output = None
    for message in result.messages:
        if isinstance(message, ToolCallRequestEvent) and message.content:
            tool = message.content[0].name
        elif isinstance(message, ToolCallExecutionEvent) and message.content:
            output = message.content[0].content
    final = result.messages[-1]
    answer = final.content if isinstance(final.content, str) else ""
    return tool, output, answer.strip()


async def _reward(task: dict[str, Any], resources: Any, mcp: bool) -> float:
    tool, output, answer = await solve(resources.llm, task["question"], mcp=mcp)
    if output is not None:  # the reflection call ran: judge it on copying the tool's result
        emit_reward(1.0 if answer == output.strip() else 0.0, step=ANSWER_CALL)
    return 1.0 if answer == str(task["answer"]) else 0.0


async def calc_autogen_agent(task: dict[str, Any], resources: Any) -> float:
    return await _reward(task, resources, mcp=False)


async def calc_autogen_mcp_agent(task: dict[str, Any], resources: Any) -> float:
    return await _reward(task, resources, mcp=True)


async def calc_autogen_default_agent(task: dict[str, Any], resources: Any) -> float:
    """Reward 1.0 when the answer (the tool's result, or the model's text when it called none) ends
    in the right number."""
    _, _, answer = await solve(resources.llm, task["question"], system=DEFAULT_SYSTEM, reflect=False)
    numbers = re.findall(r"-?\d+", answer)
    return 1.0 if numbers and numbers[-1] == str(task["answer"]) else 0.0
