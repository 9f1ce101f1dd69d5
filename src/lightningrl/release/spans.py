"""Span kinds a rollout's spans cover: agent (the runner's root), llm, reward, tool, step."""

from __future__ import annotations

from collections.abc import Iterable

from lightningstore import Span
from lightningstore.semconv import (
    GEN_AI_OPERATION,
    LLM_SPAN_NAME,
    REWARD_SPAN_NAME,
    STEP_SPAN_PREFIX,
    TOOL_SPAN_PREFIX,
)

ROOT_SPAN_NAME = "lightningrl.rollout"
KIND_ATTRIBUTES = (GEN_AI_OPERATION,)
"""The attributes `span_kind` reads besides the name: a projection of spans (query_spans_many) for kinds."""


def span_kind(span: Span) -> str:
    """The coverage kind of one span ("other" when it is none of the known ones)."""
    if span.name == ROOT_SPAN_NAME:
        return "agent"
    if span.name == REWARD_SPAN_NAME:
        return "reward"
    if span.name == LLM_SPAN_NAME or GEN_AI_OPERATION in span.attributes:
        return "llm"
    if span.name.startswith(TOOL_SPAN_PREFIX):
        return "tool"
    if span.name.startswith(STEP_SPAN_PREFIX):
        return "step"
    return "other"


def kinds_of(spans: Iterable[Span]) -> set[str]:
    return {span_kind(s) for s in spans}
