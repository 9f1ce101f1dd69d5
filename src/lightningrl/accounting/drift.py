"""Retokenization drift: what a system that rebuilds token ids from text would have trained on instead.

For every recorded LLM call with token ids, two questions:
- response: does `encode(decode(response_ids))` give back the ids the model sampled? (BPE text has many
  tokenizations; the model picked one, and re-encoding picks the canonical one);
- prompt: does re-rendering the recorded request (messages and tools, through the tokenizer's own
  chat template as the inference server renders it: tools and tool calls as `tool_prompt.render_chat`
  writes them for a template without a tool section; a completion's prompt text through the
  tokenizer) give the recorded prompt ids? An assistant's tool call re-rendered from its parsed JSON
  differs from what the model wrote when the model spaced its JSON otherwise, say.
The shares of calls where they differ are what exact token ids buy; ours train on the recorded ids.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lightningrl.counts import Counts
from lightningrl.credit.calls import llm_calls
from lightningrl.serving.tool_calls import template_messages
from lightningrl.serving.tool_prompt import forced_call_prefix, render_chat, renders_tools
from lightningstore import semconv
from lightningstore.data.span import Span


@dataclass
class DriftCounts(Counts):
    """Calls checked and how many of them a retokenizing system would have got wrong (add to total)."""

    calls: int = 0
    response_drift: int = 0
    prompt_checked: int = 0
    prompt_drift: int = 0

    def shares(self) -> dict[str, float]:
        """`response_drift` and `prompt_drift` as shares of the calls checked (absent when none were)."""
        out: dict[str, float] = {"drift_calls": float(self.calls)}
        if self.calls:
            out["response_drift"] = self.response_drift / self.calls
        if self.prompt_checked:
            out["prompt_drift"] = self.prompt_drift / self.prompt_checked
        return out


def retokenization_drift(spans: Iterable[Span], tokenizer: Any) -> DriftCounts:
    """Count, over the LLM calls with token ids, the calls whose retokenization differs."""
    spans = list(spans)
    by_id = {(span.attempt_id, span.span_id): span for span in spans}
    counts = DriftCounts()
    template_renders_tools = renders_tools(tokenizer)
    for call in llm_calls(spans):
        if not call.has_tokens:
            continue
        counts.calls += 1
        counts.response_drift += int(response_drifts(list(call.response_ids or ()), tokenizer))
        rendered = rerendered_prompt(
            by_id[call.attempt_id, call.span_id].attributes, tokenizer, template_renders_tools
        )
        if rendered is not _UNKNOWN:
            counts.prompt_checked += 1
            counts.prompt_drift += int(rendered != list(call.prompt_ids or ()))
    return counts


def response_drifts(response_ids: list[int], tokenizer: Any) -> bool:
    """True when re-encoding the decoded response (special tokens kept as text) changes its ids."""
    text = tokenizer.decode(response_ids, skip_special_tokens=False)
    return tokenizer.encode(text, add_special_tokens=False) != response_ids


_UNKNOWN: Any = object()
"""No request recorded to re-render from."""


def rerendered_prompt(
    attributes: dict[str, Any], tokenizer: Any, template_renders_tools: bool | None = None
) -> list[int] | None:
    """The prompt ids a retokenizing system would build from the recorded request; None when the
    chat template cannot render it (that system could not train on the call at all)."""
    request = _recorded_json(attributes.get(semconv.LLM_REQUEST_MESSAGES))
    if request is _UNKNOWN:
        return _UNKNOWN
    operation = attributes.get(semconv.GEN_AI_OPERATION)
    try:
        if operation == semconv.TEXT_COMPLETION_SPAN_NAME or isinstance(request, str):
            if not isinstance(request, str):
                return _UNKNOWN  # a batch of prompts or a token-id prompt: nothing to retokenize
            return list(tokenizer.encode(request))
        tools = _tools(attributes.get(semconv.LLM_REQUEST_TOOLS))
        text = render_chat(
            tokenizer,
            template_messages(request),
            tools,
            add_generation_prompt=True,
            template_renders_tools=template_renders_tools,
        )
        choice = _recorded_json(attributes.get(semconv.LLM_REQUEST_TOOL_CHOICE))
        forced = forced_call_prefix(None if choice is _UNKNOWN else choice)
        return list(tokenizer.encode(text + forced, add_special_tokens=False))
    except Exception:  # noqa: BLE001 - a Jinja template can raise anything on a message it does not expect
        return None


def _tools(value: Any) -> list[dict[str, Any]] | None:
    tools = _recorded_json(value)
    return tools if isinstance(tools, list) and tools else None


def _recorded_json(value: Any) -> Any:
    """A span attribute recorded as JSON text, parsed; `_UNKNOWN` when absent or not JSON."""
    if not isinstance(value, str):
        return _UNKNOWN
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return _UNKNOWN
