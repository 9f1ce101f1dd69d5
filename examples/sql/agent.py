"""The SQL agent: a LangGraph graph with two roles sharing one model, a writer and a checker.

    writer --(tool call)--> tools --(error, or not a query yet)--> writer   (at most 2 writer calls)
                                  --(a query ran)--> checker --> END

The writer is `ChatOpenAI(...).bind_tools([list_tables, describe_table, run_query])`; `langgraph.prebuilt`'s
ToolNode runs its calls on the task's generated SQLite database. The checker sees the question, the query
and its result and replies `approve` or `reject`. Each role's client sends the header
`x-lightningrl-agent-name: writer|checker`, which the LightningRL proxy records on the call's span, so a
trainer can train one role and leave the other's calls out of the batch.

It imports nothing from LightningRL but `emit_reward`. Rewards: the return value is 1.0 when the last
query's rows equal the gold query's rows; each writer call that sent a query gets the diagnostic step
reward `query_ran` (not the training signal); the checker's call gets the primary step reward 1.0 when
its verdict is right (approve a right result, reject a wrong one).
"""

from __future__ import annotations

import asyncio
import sqlite3
import weakref
from typing import Annotated, Any, TypedDict

import httpx
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

from runner import emit_reward

try:  # imported as a package (tests, the demo)
    from examples.sql.tasks import (
        CHECKER_SYSTEM,
        SQL_LOCK,
        WRITER_TURNS,
        natural_writer_system,
        open_database,
        run_sql,
        writer_system,
    )
except ImportError:  # pragma: no cover - examples/sql as the script directory
    from tasks import (
        CHECKER_SYSTEM,
        SQL_LOCK,
        WRITER_TURNS,
        natural_writer_system,
        open_database,
        run_sql,
        writer_system,
    )

AGENT_HEADER = "x-lightningrl-agent-name"
WRITER_MAX_TOKENS = 40
NATURAL_WRITER_MAX_TOKENS = 64
"""A real model's `<tool_call>` block with its JSON is ~35 tokens."""
CHECKER_MAX_TOKENS = 3

_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()


def shared_http() -> httpx.AsyncClient:
    """One connection pool per event loop for every rollout's clients (a new one per rollout costs CPU)."""
    loop = asyncio.get_running_loop()
    client = _POOLS.get(loop)
    if client is None:
        client = _POOLS[loop] = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=None))
    return client


def make_tools(conn: sqlite3.Connection, log: list[tuple[str, bool, str]]) -> list[BaseTool]:
    """The writer's tools over one database; `log` collects every query run as (sql, ran, text)."""

    @tool
    def list_tables() -> str:
        """List the tables."""
        with SQL_LOCK:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return ", ".join(r[0] for r in rows)

    @tool
    def describe_table(table: str) -> str:
        """Describe a table."""
        with SQL_LOCK:
            rows = conn.execute("SELECT name, type FROM pragma_table_info(?)", (table,)).fetchall()
        return ", ".join(f"{name} {kind}" for name, kind in rows) or f"error: no such table: {table}"

    @tool
    def run_query(sql: str) -> str:
        """Run a SQL query."""
        ran, text = run_sql(conn, sql)
        log.append((sql, ran, text))
        return text

    return [list_tables, describe_table, run_query]


def tool_schemas() -> list[dict[str, Any]]:
    """The tools exactly as `bind_tools` offers them to the model (the demo's warm-up renders these)."""
    return [convert_to_openai_tool(t) for t in make_tools(sqlite3.connect(":memory:"), [])]


def role_model(llm: Any, role: str, max_tokens: int) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=llm.base_url,
        api_key=llm.api_key,
        model=llm.model,
        max_tokens=max_tokens,
        max_retries=2,
        timeout=60,
        default_headers={AGENT_HEADER: role},
        http_async_client=shared_http(),
    )


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    question: str
    writer_calls: int
    verdict: str


def build_graph(
    llm: Any, conn: sqlite3.Connection, log: list[tuple[str, bool, str]], writer_max_tokens: int
) -> Any:
    tools = make_tools(conn, log)
    writer = role_model(llm, "writer", writer_max_tokens).bind_tools(tools)
    checker = role_model(llm, "checker", CHECKER_MAX_TOKENS)

    async def write(state: State) -> dict[str, Any]:
        reply = await writer.ainvoke(state["messages"])
        return {"messages": [reply], "writer_calls": state["writer_calls"] + 1}

    def after_writer(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    def after_tools(state: State) -> str:
        if log and log[-1][1]:
            return "checker"  # a query ran: check it
        return "writer" if state["writer_calls"] < WRITER_TURNS else "checker"

    async def check(state: State) -> dict[str, Any]:
        sql, _, text = log[-1] if log else ("none", False, "no query")
        reply = await checker.ainvoke(
            [SystemMessage(CHECKER_SYSTEM), HumanMessage(f"{state['question']}\nSQL: {sql}\nresult: {text}")]
        )
        return {"verdict": str(reply.content).strip()}

    graph = StateGraph(State)
    graph.add_node("writer", write)
    graph.add_node("tools", ToolNode(tools))
    graph.add_node("checker", check)
    graph.add_edge(START, "writer")
    graph.add_conditional_edges("writer", after_writer, ["tools", END])
    graph.add_conditional_edges("tools", after_tools, ["writer", "checker"])
    graph.add_edge("checker", END)
    return graph.compile()


async def answer(
    llm: Any, task: dict[str, Any], *, system: str | None = None, writer_max_tokens: int = WRITER_MAX_TOKENS
) -> dict[str, Any]:
    """Run the graph on one task (the writer's system message `system`, default the toy model's): the
    queries it ran, the writer's calls, the checker's verdict, and whether the last query's rows equal
    the gold query's."""
    conn = open_database(task["db"], task["variant"])
    log: list[tuple[str, bool, str]] = []
    try:
        graph = build_graph(llm, conn, log, writer_max_tokens)
        system = system or writer_system(task["db"])
        state = await graph.ainvoke(
            {
                "messages": [SystemMessage(system), HumanMessage(task["question"])],
                "question": task["question"],
                "writer_calls": 0,
                "verdict": "",
            },
            {"recursion_limit": 12},
        )
        _, gold = run_sql(conn, task["gold_sql"])
    finally:
        conn.close()
    # which writer call sent each query: tool messages follow the call that asked for them
    sent_by: list[int] = []
    call = -1
    for message in state["messages"]:
        if isinstance(message, AIMessage):
            call += 1
        elif isinstance(message, ToolMessage) and message.name == "run_query":
            sent_by.append(call)
    correct = bool(log) and log[-1][1] and log[-1][2] == gold
    return {
        "queries": log,
        "sent_by": sent_by,
        "writer_calls": state["writer_calls"],
        "verdict": state["verdict"] or None,
        "correct": correct,
    }


async def sql_agent(task: dict[str, Any], resources: Any) -> float:
    """The toy model's form: a system message that asks for the aggregate's name before the query."""
    return rewarded(await answer(resources.llm, task))


async def sql_natural_agent(task: dict[str, Any], resources: Any) -> float:
    """The same graph as a user writes it for a real model: the schema and the job in the system
    message (`natural_writer_system`), room for a `<tool_call>` block (examples/sql/demo_smollm2.py)."""
    system = natural_writer_system(task["db"])
    return rewarded(
        await answer(resources.llm, task, system=system, writer_max_tokens=NATURAL_WRITER_MAX_TOKENS)
    )


def rewarded(outcome: dict[str, Any]) -> float:
    """Emit the outcome's step rewards; return the episode's."""
    for (_, ran, _), call in zip(outcome["queries"], outcome["sent_by"], strict=False):
        emit_reward(1.0 if ran else 0.0, name="query_ran", step=call, primary=False)
    if outcome["verdict"] is not None:  # the checker's call comes after every writer call
        right = "approve" if outcome["correct"] else "reject"
        emit_reward(1.0 if outcome["verdict"] == right else 0.0, step=outcome["writer_calls"])
    return 1.0 if outcome["correct"] else 0.0
