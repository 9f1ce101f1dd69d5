"""A rollout's first decision, read from its spans, and how a step's rollouts split over them per slice.

The first decision is what the rollout's first LLM call chose: the tool it called, with the one short
value its arguments hold when they hold one (`search(companies)`), else the first word of its answer.
A step's row gets `decision/first` and `decision/first[tag=value]` per task tag, e.g. `add:6 sub:2`
(the three most common, then `+N` for the rest), so a policy collapsing onto one choice shows.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lightningrl.credit.calls import is_llm_span
from lightningstore import semconv
from lightningstore.data.span import Span
from runner.step_spans import ARGUMENTS as TRACE_ARGUMENTS

TOP = 3
"""Decisions named in a row's summary; the others are counted together (`+N`)."""
MAX_VALUE_CHARS = 24
"""An argument value longer than this is content (a query, a sentence), not a choice."""
MAX_LABEL_CHARS = 48
HERMES_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*(?:</tool_call>|$)", re.DOTALL)
CHOICE_VALUE = re.compile(r"^[\w.\-]+$")
PUNCTUATION = "\"'`.,:;!?()[]{}*"
Call = tuple[str, dict[str, Any]]
"""A tool call: the tool's name and its arguments."""


def first_decision(spans: Sequence[Span]) -> str | None:
    """The first LLM call's decision (see the module's docstring); None when the rollout made no call
    or its first call answered nothing."""
    calls = sorted((s for s in spans if is_llm_span(s)), key=lambda s: s.sequence_id)
    if not calls:
        return None
    first = calls[0]
    text = _response_text(first)
    call = _hermes_call(text)
    if call is None and "tool_calls" in _finish_reasons(first):
        # A chat span records the answer's content, not its tool calls: the next call's messages echo
        # them back (as the agent sent them on), else the agent's own tool span shows which ran.
        call = _echoed_call(first, calls[1:]) or _traced_call(first, spans)
    if call is not None:
        return _label(*call, _enum_arguments(first, call[0]))
    words = text.split()
    word = words[0].strip(PUNCTUATION) if words else ""
    return _clean(word) if word else None


def summarize(decisions: Iterable[str], top: int = TOP) -> str:
    """`add:6 sub:2 mul:1 +3`: the `top` most common decisions with their counts, then how many others."""
    counts = Counter(decisions).most_common()
    shown = " ".join(f"{name}:{count}" for name, count in counts[:top])
    rest = sum(count for _, count in counts[top:])
    return f"{shown} +{rest}" if rest else shown


def parse_summary(text: str) -> tuple[list[tuple[str, int]], int]:
    """`summarize`'s text back as ([(decision, count), ...], count of the others); ValueError naming the
    text when it is not one."""
    named: list[tuple[str, int]] = []
    rest = 0
    for part in str(text).split():
        name, _, count = part.rpartition(":")
        if part.startswith("+") and part[1:].isdigit():
            rest = int(part[1:])
        elif name and count.isdigit():
            named.append((name, int(count)))
        else:
            raise ValueError(f"not a decision summary ('name:count ...'): {text!r}")
    return named, rest


def first_decisions_row(rollouts: Iterable[tuple[Mapping[str, str], Sequence[Span]]]) -> dict[str, str]:
    """`decision/first` over every rollout (task tags, spans) and `decision/first[tag=value]` per slice;
    rollouts without a decision are left out, and so is a slice without any."""
    overall: list[str] = []
    by_slice: dict[str, list[str]] = defaultdict(list)
    for tags, spans in rollouts:
        decision = first_decision(spans)
        if decision is None:
            continue
        overall.append(decision)
        for key, value in tags.items():
            by_slice[f"{key}={value}"].append(decision)
    if not overall:
        return {}
    row = {"decision/first": summarize(overall)}
    row.update({f"decision/first[{k}]": summarize(v) for k, v in sorted(by_slice.items())})
    return row


def _response_text(span: Span) -> str:
    """The first choice's text (`LLM_RESPONSE_TEXT`, else choice 0 of `LLM_CHOICES`)."""
    text = span.attributes.get(semconv.LLM_RESPONSE_TEXT)
    if isinstance(text, str):
        return text
    choices = _json(span.attributes.get(semconv.LLM_CHOICES))
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return str(choices[0].get("text") or "")
    return ""


def _finish_reasons(span: Span) -> list[str]:
    reasons = span.attributes.get(semconv.GEN_AI_FINISH_REASONS) or []
    return [reasons] if isinstance(reasons, str) else [str(r) for r in reasons]


def _hermes_call(text: str) -> Call | None:
    """A `<tool_call>{"name": ..., "arguments": {...}}` block in the text (a server that leaves tool calls
    in the text, as the model wrote them)."""
    match = HERMES_CALL.search(text)
    data = _json(match.group(1)) if match else None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    return data["name"], _arguments(data.get("arguments"))


def _echoed_call(first: Span, later: Sequence[Span]) -> Call | None:
    """The first tool call of the assistant message that follows the first call's messages in the next
    call's messages (OpenAI agents send the answer back with the tool's result)."""
    if not later:
        return None
    sent = _json(first.attributes.get(semconv.LLM_REQUEST_MESSAGES))
    following = _json(later[0].attributes.get(semconv.LLM_REQUEST_MESSAGES))
    if not isinstance(following, list):
        return None
    start = len(sent) if isinstance(sent, list) else 0
    for message in following[start:]:
        if isinstance(message, dict) and message.get("role") == "assistant" and message.get("tool_calls"):
            calls = message["tool_calls"]
            function = calls[0].get("function") if isinstance(calls, list) and calls else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                return function["name"], _arguments(function.get("arguments"))
    return None


def _traced_call(first: Span, spans: Sequence[Span]) -> Call | None:
    """The first `tool.<name>` span after the first call (the runner's `@trace` and instrumentations)."""
    tools = sorted(
        (
            s
            for s in spans
            if s.name.startswith(semconv.TOOL_SPAN_PREFIX) and s.sequence_id > first.sequence_id
        ),
        key=lambda s: s.sequence_id,
    )
    if not tools:
        return None
    return tools[0].name.removeprefix(semconv.TOOL_SPAN_PREFIX), _arguments(
        tools[0].attributes.get(TRACE_ARGUMENTS)
    )


def _enum_arguments(span: Span, tool: str) -> set[str]:
    """The tool's parameters the request's tool schema declares with an `enum` (its choices)."""
    tools = _json(span.attributes.get(semconv.LLM_REQUEST_TOOLS))
    for entry in tools if isinstance(tools, list) else []:
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict) and function.get("name") == tool:
            properties = (function.get("parameters") or {}).get("properties") or {}
            return {k for k, v in properties.items() if isinstance(v, dict) and "enum" in v}
    return set()


def _label(tool: str, arguments: dict[str, Any], enums: set[str]) -> str:
    """`tool(value)` when the arguments hold one choice (an enum parameter's value, else the one argument
    when it is a short word), else `tool`."""
    chosen = [str(arguments[k]) for k in sorted(enums) if k in arguments]
    if not chosen and len(arguments) == 1:
        [value] = arguments.values()
        if isinstance(value, str) and len(value) <= MAX_VALUE_CHARS and CHOICE_VALUE.match(value):
            chosen = [value]
    return _clean(f"{tool}({chosen[0]})" if len(chosen) == 1 else tool)


def _clean(label: str) -> str:
    """One token of a summary: no whitespace, at most `MAX_LABEL_CHARS`."""
    return "_".join(label.split())[:MAX_LABEL_CHARS]


def _arguments(value: Any) -> dict[str, Any]:
    """Tool arguments given as an object or as its JSON text ({} when neither)."""
    data = _json(value) if isinstance(value, str) else value
    return data if isinstance(data, dict) else {}


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return None
