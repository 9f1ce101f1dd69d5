"""examples/sql: the LangGraph writer/checker agent.

The writer's warm-up prompts render exactly as the inference server renders the agent's requests (with
the tools `bind_tools` offers), the split holds out (column, aggregate) pairs, and a short `fit` through
the real proxy runs the graph's tool calls, tags each call with its role and trains only the writer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from examples.sql.agent import tool_schemas
from examples.sql.tasks import (
    AGGREGATES,
    demonstrations,
    open_database,
    rendered_writer_messages,
    run_sql,
    split_tasks,
    sql_for,
    thought_text,
    vocabulary,
    writer_messages,
)
from lightningstore import semconv


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory):
    from transformers import AutoTokenizer

    from lightningrl.demos.tinylm import build_tiny_model

    path = build_tiny_model(
        tmp_path_factory.mktemp("sql-tok") / "m",
        tokenizer_kind="word",
        extra_text=vocabulary(tool_schemas()),
        hidden_size=16,
        num_layers=1,
        num_heads=2,
    )
    return AutoTokenizer.from_pretrained(path)


def test_warmup_prompts_render_as_the_server_renders_the_agents_requests(tokenizer) -> None:
    tools = tool_schemas()
    assert [t["function"]["name"] for t in tools] == ["list_tables", "describe_table", "run_query"]
    train, _ = split_tasks(0)
    task = train[0].as_input()
    served = tokenizer.apply_chat_template(
        writer_messages(task), tools=tools, tokenize=False, add_generation_prompt=True
    )
    demo = tokenizer.apply_chat_template(
        rendered_writer_messages(task, tools), tokenize=False, add_generation_prompt=True
    )
    assert served == demo
    # the rewrite after an error: the history as the server renders LangChain's tool call and tool message
    bad = sql_for("MAX", "nope", task["table"])
    _, error = run_sql(open_database(task["db"], task["variant"]), bad)
    assert error == "error: no such column: nope"
    history = [
        *writer_messages(task),
        {
            "role": "assistant",
            "content": thought_text(task["word"], "MAX"),  # the writer's words before its call
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "run_query", "arguments": {"sql": bad}}}
            ],
        },
        {"role": "tool", "content": error, "tool_call_id": "c1"},
    ]
    served = tokenizer.apply_chat_template(history, tools=tools, tokenize=False, add_generation_prompt=True)
    demo = tokenizer.apply_chat_template(
        rendered_writer_messages(task, tools, (thought_text(task["word"], "MAX"), bad, error)),
        tokenize=False,
        add_generation_prompt=True,
    )
    assert served == demo
    # every piece of a demonstration (a word, a punctuation run) is one token of the vocabulary
    vocab = tokenizer.get_vocab()
    pre = tokenizer.backend_tokenizer.pre_tokenizer
    for messages, completion in demonstrations(train, tools, 0, 20):
        for text in [completion, *(m["content"] for m in messages)]:
            for piece, _ in pre.pre_tokenize_str(text):
                assert piece in vocab or piece.strip("Ġ").isdigit(), (text, piece)


def test_heldout_pairs_are_never_asked_in_training_and_aggregates_differ() -> None:
    train, heldout = split_tasks(0)
    pairs = {(t.column, t.aggregate) for t in train}
    assert heldout and not pairs & {(t.column, t.aggregate) for t in heldout}
    assert {t.aggregate for t in heldout} == set(AGGREGATES)
    for task in train[:: len(train) // 10]:
        conn = open_database(task.db, task.variant)
        results = {run_sql(conn, sql_for(a, task.column, task.table)) for a in AGGREGATES}
        assert len(results) == len(AGGREGATES) and all(ran for ran, _ in results)


async def test_toolnode_runs_the_writers_calls_on_the_task_database() -> None:
    """ToolNode runs sync tools in a worker thread: the in-memory database must serve them there."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from examples.sql.agent import make_tools

    train, _ = split_tasks(0)
    task = train[0]
    conn = open_database(task.db, task.variant)
    log: list[tuple[str, bool, str]] = []
    calls = [
        {"name": "run_query", "args": {"sql": task.gold_sql}, "id": "c1"},
        {"name": "run_query", "args": {"sql": sql_for("MAX", "nope", task.table)}, "id": "c2"},
        {"name": "list_tables", "args": {}, "id": "c3"},
        {"name": "describe_table", "args": {"table": task.table}, "id": "c4"},
    ]
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(make_tools(conn, log)))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    out = await graph.compile().ainvoke({"messages": [AIMessage("", tool_calls=calls)]})
    texts = {m.tool_call_id: m.content for m in out["messages"][1:]}  # ToolNode runs calls concurrently
    gold = run_sql(open_database(task.db, task.variant), task.gold_sql)
    error = "error: no such column: nope"
    assert sorted(log) == sorted([(task.gold_sql, True, gold[1]), (calls[1]["args"]["sql"], False, error)])
    assert (texts["c1"], texts["c2"], texts["c3"]) == (gold[1], error, task.table)
    assert texts["c4"].startswith("name TEXT, ")


@pytest.mark.slow
def test_fit_trains_the_writer_only(tmp_path: Path, warm_model, read_store) -> None:
    from examples.sql.agent import sql_agent
    from lightningrl import fit

    tools = tool_schemas()
    train, heldout = split_tasks(0)
    # format only: 120 steps of a 1-layer model write the tool call (the columns are often wrong)
    model = warm_model(vocabulary(tools), demonstrations(train, tools, 0, 400), steps=120)
    rows = [{"task_id": t.task_id, "input": t.as_input()} for t in train[::37]]
    result = fit(
        sql_agent,
        rows,
        model=model,
        config={
            "steps": 2,
            "tasks_per_step": 2,
            "rollouts_per_task": 4,
            "val_every": 0,
            "validate_first": False,
            "agent_names": frozenset({"writer"}),
            "return_to_judged_calls": False,
            "trainer": {"lr": 1e-3},
            "show_progress": False,
            "dynamic_sampling": False,  # the test counts rollouts and their calls
            "hard_slice_factor": 1,
            "deterministic": True,  # seeded rollouts: the same calls every run, not a sampling lottery
        },
        workers=8,
        runner_processes=1,
        engine="ours",
        output_dir=tmp_path / "run",
    )
    run = read_store(tmp_path / "run" / "store.db")
    spans = run.llm_spans("train")
    roles = [s.attributes.get(semconv.AGENT_NAME) for s in spans]
    assert set(roles) <= {"writer", "checker"} and "writer" in roles
    for span in spans:
        assert (
            span.attributes[semconv.LLM_PROMPT_TOKEN_IDS] and span.attributes[semconv.LLM_RESPONSE_TOKEN_IDS]
        )
    # the writer's <tool_call> was parsed into an OpenAI tool call and ToolNode ran it: each query run
    # left its step reward, and the tools offered were rendered into the recorded prompt
    ran = [r for rewards in run.rewards.values() for r in rewards if r.name == "query_ran"]
    assert ran, "no query was run"
    writer = next(s for s in spans if s.attributes.get(semconv.AGENT_NAME) == "writer")
    prompt = writer.attributes[semconv.LLM_PROMPT_TOKEN_IDS]
    from transformers import AutoTokenizer

    assert '"name": "run_query"' in AutoTokenizer.from_pretrained(model).decode(prompt)
    # training only the writer: every checker call of a train rollout is left out of the batch, and counted
    steps = [r for r in result.metrics if "credit/llm_calls" in r]
    assert len(steps) == 2
    assert sum(r["credit/llm_calls"] for r in steps) == len(spans)
    assert sum(r["credit/calls_filtered_agent"] for r in steps) == roles.count("checker")
    assert sum(r["credit/calls_used"] for r in steps) == roles.count("writer")
    assert any(r.get("update/sequences", 0) > 0 for r in steps)
    assert json.dumps(result.metrics)  # plain numbers, as metrics.csv holds them


def test_natural_demonstrations_call_run_query_on_the_questions_column() -> None:
    """The real model's warm-up: LangChain's tools, a `run_query` block on the question's table and column;
    with the right aggregate its rows are the gold rows, at random every aggregate appears."""
    from examples.sql.tasks import natural_demonstrations, natural_writer_system

    tools = tool_schemas()
    train, heldout = split_tasks(0)
    assert len(heldout) >= 100
    by_question = {t.question: t for t in train}
    for random_aggregate in (False, True):
        seen = set()
        for messages, text, offered in natural_demonstrations(train, tools, 0, 40, random_aggregate):
            assert offered == tools and text.startswith("<tool_call>\n") and text.endswith("\n</tool_call>")
            call = json.loads(text.removeprefix("<tool_call>\n").removesuffix("\n</tool_call>"))
            task = by_question[messages[1]["content"]]
            assert messages[0]["content"] == natural_writer_system(task.db)
            assert (
                call["name"] == "run_query"
                and f"({task.column}) FROM {task.table}" in call["arguments"]["sql"]
            )
            conn = open_database(task.db, task.variant)
            same = run_sql(conn, call["arguments"]["sql"]) == run_sql(conn, task.gold_sql)
            assert same or random_aggregate, call
            seen.add(call["arguments"]["sql"].split("(")[0].removeprefix("SELECT "))
        assert seen == set(AGGREGATES), seen  # 40 draws of each kind: every aggregate (right or random)
