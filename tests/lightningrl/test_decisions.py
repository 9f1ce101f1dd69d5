"""The first decision of a rollout read from its spans, and a step's decisions summarized per slice."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lightningrl.rl.decisions import first_decision, first_decisions_row, parse_summary, summarize
from lightningstore import semconv
from lightningstore.data.span import Span
from runner.step_spans import ARGUMENTS

SEARCH_SCHEMA = {
    "type": "function",
    "function": {
        "name": "search",
        "parameters": {
            "type": "object",
            "properties": {
                "collection": {"type": "string", "enum": ["companies", "people"]},
                "query": {"type": "string"},
            },
        },
    },
}


def span(sequence_id: int, name: str = "chat", **attributes: Any) -> Span:
    return Span(
        rollout_id="r",
        attempt_id="a",
        trace_id="t",
        span_id=f"s{sequence_id}",
        name=name,
        attributes=attributes,
        sequence_id=sequence_id,
    )


def llm(sequence_id: int, text: str, messages: list[dict[str, Any]] | None = None, **extra: Any) -> Span:
    attributes = {
        semconv.GEN_AI_OPERATION: "chat",
        semconv.LLM_RESPONSE_TEXT: text,
        semconv.LLM_REQUEST_MESSAGES: json.dumps(messages or [{"role": "user", "content": "q"}]),
        **extra,
    }
    return span(sequence_id, **attributes)


def tool_call_message(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def test_a_hermes_block_names_the_tool_and_its_one_short_value() -> None:
    text = 'Let me add.\n<tool_call>{"name": "add", "arguments": {"a": 3, "b": 4}}</tool_call>'
    assert first_decision([llm(1, text)]) == "add"
    one = '<tool_call>{"name": "lookup", "arguments": {"table": "orders"}}</tool_call>'
    assert first_decision([llm(1, one)]) == "lookup(orders)"
    long = '<tool_call>{"name": "lookup", "arguments": {"query": "who founded acme corp"}}</tool_call>'
    assert first_decision([llm(1, long)]) == "lookup"


def test_a_parsed_tool_call_is_read_from_the_next_calls_messages() -> None:
    asked = [{"role": "system", "content": "s"}, {"role": "user", "content": "who founded acme?"}]
    first = llm(
        1,
        "",
        asked,
        **{
            semconv.GEN_AI_FINISH_REASONS: ["tool_calls"],
            semconv.LLM_REQUEST_TOOLS: json.dumps([SEARCH_SCHEMA]),
        },
    )
    sent_on = [
        *asked,
        tool_call_message("search", {"collection": "companies", "query": "acme founder"}),
        {"role": "tool", "tool_call_id": "c1", "content": "Acme was founded by Ada."},
    ]
    # The enum parameter is the choice, however long the other arguments are.
    assert first_decision([llm(5, "Ada", sent_on), first]) == "search(companies)"
    # Without the schema: two arguments are not one choice.
    bare = llm(1, "", asked, **{semconv.GEN_AI_FINISH_REASONS: ["tool_calls"]})
    assert first_decision([bare, llm(5, "Ada", sent_on)]) == "search"


def test_a_traced_tool_span_names_the_tool_when_no_later_call_echoes_it() -> None:
    first = llm(1, "", **{semconv.GEN_AI_FINISH_REASONS: "tool_calls"})
    earlier_tool = span(0, "tool.setup", **{ARGUMENTS: json.dumps({"mode": "x"})})
    tool = span(2, "tool.search_people", **{ARGUMENTS: json.dumps({"query": "Ada"})})
    assert first_decision([tool, first, earlier_tool]) == "search_people(Ada)"


def test_a_plain_answer_gives_its_first_word() -> None:
    assert first_decision([llm(2, "later"), llm(1, '  "Paris," I think.')]) == "Paris"
    assert first_decision([llm(1, "   ")]) is None
    assert first_decision([span(1, "tool.search")]) is None  # no LLM call at all


def test_summaries_keep_the_top_three_and_count_the_rest() -> None:
    text = summarize(["add"] * 6 + ["sub"] * 2 + ["mul", "div", "pow"])
    assert text == "add:6 sub:2 mul:1 +2"  # ties in the order first seen
    assert parse_summary(text) == ([("add", 6), ("sub", 2), ("mul", 1)], 2)
    assert parse_summary("f(a:b):3") == ([("f(a:b)", 3)], 0)
    with pytest.raises(ValueError, match="not a decision summary.*'add six'"):
        parse_summary("add six")


def test_the_row_splits_decisions_by_slice() -> None:
    def rollout(op: str, text: str) -> tuple[dict[str, str], list[Span]]:
        return {"op": op}, [llm(1, text)]

    rollouts = [rollout("plus", "add 1 2")] * 3 + [rollout("plus", "sub 1 2"), rollout("minus", "sub 3 1")]
    rollouts.append(({"op": "minus"}, [span(1, "tool.x")]))  # no decision: left out
    assert first_decisions_row(rollouts) == {
        "decision/first": "add:3 sub:2",
        "decision/first[op=minus]": "sub:1",
        "decision/first[op=plus]": "add:3 sub:1",
    }
    assert first_decisions_row([({"op": "plus"}, [])]) == {}
