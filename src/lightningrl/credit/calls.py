"""LlmCall: one LLM-call span of a rollout, read into the token view training needs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from lightningstore import semconv
from lightningstore.data.span import Span

DEFAULT_TEMPERATURE = 1.0
N = TypeVar("N", int, float)
"""The temperature of a call whose span records none: OpenAI-compatible servers' default."""


@dataclass(frozen=True)
class LlmCall:
    """An LLM call in call order; token fields are None when the span did not record them."""

    index: int
    """0-based position among the rollout's LLM calls (what `Reward.step` refers to)."""
    span_id: str
    attempt_id: str
    agent_name: str | None
    prompt_ids: tuple[int, ...] | None
    response_ids: tuple[int, ...] | None
    logprobs: tuple[float, ...] | None
    temperature: float
    """The temperature the call was sampled at (the span's `gen_ai.request.temperature`, as sent)."""
    trainable: bool
    """The span's `lightningrl.llm.trainable` (decided once, when it was recorded: see
    `lightningstore.llm_call.is_trainable`); see `_trainable` for spans recorded without it."""
    resource_version: str | None = None
    """The resource version that served the call (the proxy records it); None when not recorded."""
    decision: str = "answer"
    """The kind of decision the call made: the key the agent named (`x-lightningrl-decision`), else
    "tool" when it answered with tool calls and "answer" otherwise. With the agent's name it is the
    call's role, what the "role" baseline compares it with (`lightningrl.rl.advantages`)."""

    @property
    def role(self) -> str:
        """Agent and kind of decision: calls of one role are compared with each other."""
        return f"{self.agent_name or ''}/{self.decision}"

    @property
    def has_tokens(self) -> bool:
        """Both token lists are recorded and non-empty (an empty side gives nothing to train)."""
        return bool(self.prompt_ids) and bool(self.response_ids)

    @property
    def logprobs_aligned(self) -> bool:
        """One recorded logprob per response token."""
        return (
            self.logprobs is not None
            and self.response_ids is not None
            and (len(self.logprobs) == len(self.response_ids))
        )


# GenAI operations that are one model call; `invoke_agent`, `create_agent`, `execute_tool` and
# `embeddings` (AutoGen and others record them on the global provider) are not.
MODEL_CALL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})


def is_llm_span(span: Span) -> bool:
    """Token-id attributes mark an LLM call; a model-call GenAI operation or the span name marks one without them."""
    attributes = span.attributes
    return (
        semconv.LLM_PROMPT_TOKEN_IDS in attributes
        or semconv.LLM_RESPONSE_TOKEN_IDS in attributes
        or attributes.get(semconv.GEN_AI_OPERATION) in MODEL_CALL_OPERATIONS
        or span.name == semconv.LLM_SPAN_NAME
    )


def llm_calls(spans: Iterable[Span]) -> list[LlmCall]:
    """The LLM calls among `spans`, ordered by the store's sequence id (call order)."""
    ordered = sorted((s for s in spans if is_llm_span(s)), key=lambda s: s.sequence_id)
    return [_read_call(index, span) for index, span in enumerate(ordered)]


def _read_call(index: int, span: Span) -> LlmCall:
    attributes = span.attributes
    agent = attributes.get(semconv.AGENT_NAME, span.resource.get(semconv.AGENT_NAME))
    prompt_ids = _numbers(attributes.get(semconv.LLM_PROMPT_TOKEN_IDS), int)
    response_ids = _numbers(attributes.get(semconv.LLM_RESPONSE_TOKEN_IDS), int)
    logprobs = _numbers(attributes.get(semconv.LLM_RESPONSE_LOGPROBS), float)
    return LlmCall(
        index=index,
        span_id=span.span_id,
        attempt_id=span.attempt_id,
        agent_name=None if agent is None else str(agent),
        prompt_ids=prompt_ids,
        response_ids=response_ids,
        logprobs=logprobs,
        temperature=_temperature(attributes.get(semconv.GEN_AI_TEMPERATURE)),
        trainable=_trainable(attributes.get(semconv.LLM_TRAINABLE), prompt_ids, response_ids, logprobs),
        resource_version=_text(attributes.get(semconv.LLM_RESOURCE_VERSION)),
        decision=_decision(attributes),
    )


def _decision(attributes: dict[str, Any]) -> str:
    """The agent's named decision key, else "tool" for a call that finished with tool calls, else "answer"."""
    named = _text(attributes.get(semconv.DECISION))
    if named:
        return named
    reasons = attributes.get(semconv.GEN_AI_FINISH_REASONS) or ()
    if isinstance(reasons, str):
        reasons = (reasons,)
    return "tool" if "tool_calls" in reasons else "answer"


def _trainable(
    recorded: Any,
    prompt_ids: tuple[int, ...] | None,
    response_ids: tuple[int, ...] | None,
    logprobs: tuple[float, ...] | None,
) -> bool:
    """The recorded `trainable` flag; for a span without one, whether its tokens are there to train on.

    Spans recorded before the flag was written everywhere (older `instrument_openai` failures) and
    spans from other OpenTelemetry instrumentations lack it: they are trainable when prompt and
    response ids are non-empty and there is one logprob per response token, the rule credit
    assignment applied before the flag existed. A flag that is not a bool counts as missing.
    """
    if isinstance(recorded, bool):
        return recorded
    return (
        bool(prompt_ids)
        and bool(response_ids)
        and logprobs is not None
        and len(logprobs) == len(response_ids or ())
    )


def _text(value: Any) -> str | None:
    return str(value) if value else None


def _temperature(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return DEFAULT_TEMPERATURE


def _numbers(value: Any, kind: Callable[[Any], N]) -> tuple[N, ...] | None:
    # OTLP ingest may deliver sequences as lists or tuples; anything else is "not recorded".
    if not isinstance(value, list | tuple):
        return None
    try:
        return tuple(kind(v) for v in value)
    except (TypeError, ValueError):
        return None
    try:
        return tuple(float(v) for v in value)
    except (TypeError, ValueError):
        return None
