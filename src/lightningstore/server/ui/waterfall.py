"""One attempt's spans as a waterfall: the span tree flattened depth-first, each row placed on the attempt's
timeline, LLM calls read into messages, token counts and a logprob summary, rewards pinned to what they judge.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lightningstore import semconv
from lightningstore.data.reward import Reward
from lightningstore.data.span import Span

TRACE_ARGUMENTS = "lightningrl.trace.arguments"
TRACE_RESULT = "lightningrl.trace.result"
HIDDEN_ATTRIBUTES = {
    semconv.ROLLOUT_ID,
    semconv.ATTEMPT_ID,
    semconv.LLM_PROMPT_TOKEN_IDS,
    semconv.LLM_RESPONSE_TOKEN_IDS,
    semconv.LLM_RESPONSE_LOGPROBS,
    semconv.LLM_REQUEST_MESSAGES,
    semconv.LLM_RESPONSE_TEXT,
}


@dataclass(frozen=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True)
class LogprobSummary:
    count: int
    mean: float
    minimum: float
    total: float

    @property
    def perplexity(self) -> float:
        return math.exp(-self.mean)


@dataclass(frozen=True)
class LlmView:
    """What a person reads of one model call."""

    index: int
    """0-based position among the attempt's LLM calls: what a reward's `step` names."""
    model: str | None
    messages: list[Message]
    response: str | None
    input_tokens: int | None
    output_tokens: int | None
    logprobs: LogprobSummary | None
    temperature: float | None
    trainable: bool | None
    finish_reasons: list[str]


@dataclass
class SpanRow:
    span: Span
    depth: int
    kind: str
    """llm, tool, step, reward, event, agent or span."""
    offset_pct: float
    width_pct: float
    duration_ms: float | None
    llm: LlmView | None = None
    rewards: list[Reward] = field(default_factory=list)
    attributes: list[tuple[str, str]] = field(default_factory=list)
    error: str | None = None


@dataclass
class Waterfall:
    rows: list[SpanRow]
    total_ms: float
    episode_rewards: list[Reward]
    """Rewards judging the whole attempt (no span, no step), and those whose target is not among the spans."""

    @property
    def llm_calls(self) -> int:
        return sum(1 for row in self.rows if row.kind == "llm")


def is_llm_span(span: Span) -> bool:
    """The same mark credit assignment uses: token ids, a GenAI operation, or the `chat` name."""
    a = span.attributes
    return (
        semconv.LLM_PROMPT_TOKEN_IDS in a
        or semconv.LLM_RESPONSE_TOKEN_IDS in a
        or semconv.GEN_AI_OPERATION in a
        or span.name == semconv.LLM_SPAN_NAME
    )


def span_kind(span: Span) -> str:
    if is_llm_span(span):
        return "llm"
    if span.name.startswith(semconv.TOOL_SPAN_PREFIX):
        return "tool"
    if span.name.startswith(semconv.STEP_SPAN_PREFIX):
        return "step"
    if span.name == semconv.REWARD_SPAN_NAME:
        return "reward"
    if span.name == semconv.EVENT_SPAN_NAME:
        return "event"
    if span.parent_id is None and span.name.startswith("lightningrl."):
        return "agent"
    return "span"


def build_waterfall(spans: Sequence[Span], rewards: Sequence[Reward]) -> Waterfall:
    """The attempt's spans as rows (parents before children, siblings by start time); `rewards` are the
    attempt's: each is pinned to the span it names, or to the LLM call its `step` counts to."""
    ids = {s.span_id for s in spans}
    children: dict[str | None, list[Span]] = {}
    for span in spans:
        parent = span.parent_id if span.parent_id in ids else None
        children.setdefault(parent, []).append(span)
    _adopt_by_time(children)
    for group in children.values():
        group.sort(key=lambda s: (s.start_time if s.start_time is not None else math.inf, s.sequence_id))
    starts = [s.start_time for s in spans if s.start_time is not None]
    ends = [s.end_time or s.start_time for s in spans if (s.end_time or s.start_time) is not None]
    t0 = min(starts, default=0.0)
    total = max(max(ends, default=t0) - t0, 1e-9)
    llm_order = [s.span_id for s in sorted(spans, key=lambda s: s.sequence_id) if is_llm_span(s)]

    rows: list[SpanRow] = []
    by_span: dict[str, SpanRow] = {}

    def visit(span: Span, depth: int, seen: set[str]) -> None:
        if span.span_id in seen:  # a parent loop in bad data must not recurse forever
            return
        seen.add(span.span_id)
        row = _row(span, depth, t0, total, llm_order)
        rows.append(row)
        by_span[span.span_id] = row
        for child in children.get(span.span_id, []):
            visit(child, depth + 1, seen)

    seen: set[str] = set()
    for root in children.get(None, []):
        visit(root, 0, seen)
    for span in sorted(spans, key=lambda s: s.sequence_id):  # spans in a parent loop: shown, as roots
        if span.span_id not in seen:
            visit(span, 0, seen)
    episode: list[Reward] = []
    for reward in rewards:
        target = reward.span_id
        if target is None and reward.step is not None and reward.step < len(llm_order):
            target = llm_order[reward.step]
        if target is not None and target in by_span:
            by_span[target].rewards.append(reward)
        else:
            episode.append(reward)
    return Waterfall(rows=rows, total_ms=total * 1000, episode_rewards=episode)


def _adopt_by_time(children: dict[str | None, list[Span]]) -> None:
    """Spans without a parent here (a proxy's LLM call when the agent sent no traceparent) go under the
    attempt's one agent span when they ran inside it, so the waterfall reads in the order things happened."""
    roots = children.get(None, [])
    agents = [s for s in roots if span_kind(s) == "agent"]
    if len(agents) != 1 or agents[0].start_time is None or agents[0].end_time is None:
        return
    agent = agents[0]
    inside = [
        s
        for s in roots
        if s is not agent and s.start_time is not None and agent.start_time <= s.start_time <= agent.end_time  # type: ignore[operator]
    ]
    if inside:
        children[None] = [s for s in roots if s not in inside]
        children.setdefault(agent.span_id, []).extend(inside)


def _row(span: Span, depth: int, t0: float, total: float, llm_order: list[str]) -> SpanRow:
    start = span.start_time if span.start_time is not None else t0
    end = span.end_time if span.end_time is not None else start
    kind = span_kind(span)
    row = SpanRow(
        span=span,
        depth=depth,
        kind=kind,
        offset_pct=round(100 * (start - t0) / total, 3),
        width_pct=round(max(100 * (end - start) / total, 0.4), 3),
        duration_ms=None if span.end_time is None or span.start_time is None else (end - start) * 1000,
    )
    if span.status.status_code == "ERROR":
        row.error = span.status.description or "error"
    if kind == "llm":
        row.llm = _llm_view(span, llm_order.index(span.span_id))
    row.attributes = [(k, _text(v)) for k, v in span.attributes.items() if k not in HIDDEN_ATTRIBUTES]
    return row


def _llm_view(span: Span, index: int) -> LlmView:
    a = span.attributes
    response_ids = a.get(semconv.LLM_RESPONSE_TOKEN_IDS)
    prompt_ids = a.get(semconv.LLM_PROMPT_TOKEN_IDS)
    finish = a.get(semconv.GEN_AI_FINISH_REASONS) or []
    return LlmView(
        index=index,
        model=_str(a.get(semconv.GEN_AI_RESPONSE_MODEL) or a.get(semconv.GEN_AI_REQUEST_MODEL)),
        messages=_messages(a.get(semconv.LLM_REQUEST_MESSAGES)),
        response=_str(a.get(semconv.LLM_RESPONSE_TEXT)),
        input_tokens=_count(a.get(semconv.GEN_AI_INPUT_TOKENS), prompt_ids),
        output_tokens=_count(a.get(semconv.GEN_AI_OUTPUT_TOKENS), response_ids),
        logprobs=_summary(a.get(semconv.LLM_RESPONSE_LOGPROBS)),
        temperature=_float(a.get(semconv.GEN_AI_TEMPERATURE)),
        trainable=a.get(semconv.LLM_TRAINABLE) if isinstance(a.get(semconv.LLM_TRAINABLE), bool) else None,
        finish_reasons=[str(f) for f in finish] if isinstance(finish, list) else [str(finish)],
    )


def _messages(raw: Any) -> list[Message]:
    """The request's messages (chat) or prompt (completion) as role + text; tool calls shown as JSON."""
    if raw is None:
        return []
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return [Message("prompt", str(raw))]
    if isinstance(value, str):
        return [Message("prompt", value)]
    if not isinstance(value, list):
        return [Message("prompt", _text(value))]
    out = []
    for item in value:
        if not isinstance(item, dict):
            out.append(Message("prompt", _text(item)))
            continue
        content = item.get("content")
        text = content if isinstance(content, str) else ("" if content is None else _text(content))
        if item.get("tool_calls"):
            text = (text + "\n" if text else "") + "tool calls: " + _text(item["tool_calls"])
        out.append(Message(str(item.get("role", "?")), text))
    return out


def _summary(raw: Any) -> LogprobSummary | None:
    if not isinstance(raw, list) or not raw:
        return None
    values = [float(v) for v in raw if isinstance(v, int | float) and not isinstance(v, bool)]
    if not values:
        return None
    return LogprobSummary(
        count=len(values), mean=sum(values) / len(values), minimum=min(values), total=sum(values)
    )


def _count(given: Any, ids: Any) -> int | None:
    if isinstance(given, int) and not isinstance(given, bool):
        return given
    return len(ids) if isinstance(ids, list) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
