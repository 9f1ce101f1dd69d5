"""The one LLM span a proxied call becomes, with the semconv keys credit assignment reads."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

import orjson

from lightningstore import semconv
from lightningstore.proxy.binding import BoundLLM
from lightningstore.proxy.record import CallRecord
from lightningstore.proxy.request import CallRequest
from lightningstore.span import SpanIn, SpanStatus

SERVICE_NAME = "lightningstore.proxy"
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")


@dataclass(frozen=True)
class CallContext:
    """Who made the call and when: ids from the URL, headers, and the proxy's clock."""

    rollout_id: str
    attempt_id: str
    agent_name: str | None
    traceparent: str | None
    start_time: float


def _trace_ids(traceparent: str | None) -> tuple[str, str | None]:
    """(trace_id, parent span id): the agent's W3C trace when it sent one, else a new trace."""
    match = _TRACEPARENT.match(traceparent.strip().lower()) if traceparent else None
    if match and set(match.group(1)) != {"0"}:
        return match.group(1), match.group(2)
    return secrets.token_hex(16), None


def _json(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()


def build_span(
    context: CallContext, call: CallRequest, bound: BoundLLM, record: CallRecord, end_time: float
) -> SpanIn:
    """The SpanIn for one call; status ERROR with the upstream's reason when it failed."""
    body = call.body
    choices = record.ordered_choices()
    first = choices[0] if choices else None
    output_tokens = record.output_tokens
    if output_tokens is None and choices and all(c.token_ids is not None for c in choices):
        output_tokens = sum(len(c.token_ids or ()) for c in choices)
    prompt_ids = record.prompt_ids()
    input_tokens = (
        record.input_tokens
        if record.input_tokens is not None
        else (len(prompt_ids) if prompt_ids is not None else None)
    )
    attributes: dict[str, Any] = {
        semconv.ROLLOUT_ID: context.rollout_id,
        semconv.ATTEMPT_ID: context.attempt_id,
        semconv.AGENT_NAME: context.agent_name,
        semconv.GEN_AI_OPERATION: "chat" if call.kind == "chat" else "text_completion",
        semconv.GEN_AI_SYSTEM: bound.llm.provider,
        semconv.GEN_AI_REQUEST_MODEL: body.get("model"),
        semconv.GEN_AI_RESPONSE_MODEL: record.response_model,
        semconv.GEN_AI_RESPONSE_ID: record.response_id,
        semconv.GEN_AI_FINISH_REASONS: [c.finish_reason for c in choices] if choices else None,
        semconv.GEN_AI_INPUT_TOKENS: input_tokens,
        semconv.GEN_AI_OUTPUT_TOKENS: output_tokens,
        semconv.GEN_AI_TEMPERATURE: body.get("temperature"),
        semconv.GEN_AI_TOP_P: body.get("top_p"),
        semconv.GEN_AI_MAX_TOKENS: body.get("max_completion_tokens") or body.get("max_tokens"),
        semconv.LLM_REQUEST_MESSAGES: _json(call.prompt),
        semconv.LLM_RESPONSE_TEXT: first.text if first else None,
        semconv.LLM_PROMPT_TOKEN_IDS: prompt_ids,
        semconv.LLM_RESPONSE_TOKEN_IDS: first.token_ids if first else None,
        semconv.LLM_RESPONSE_LOGPROBS: first.logprobs if first else None,
        semconv.LLM_CHOICES: _json([c.as_json() for c in choices]) if len(choices) > 1 else None,
        semconv.LLM_UPSTREAM: record.upstream,
        semconv.LLM_RETRIES: record.retries,
        semconv.LLM_LATENCY_MS: round((end_time - context.start_time) * 1000.0, 3),
        semconv.LLM_TRAINABLE: bound.llm.provider == "openai"
        and record.error is None
        and record.has_tokens(),
        semconv.LLM_RESOURCE_VERSION: bound.version_id,
    }
    trace_id, parent_id = _trace_ids(context.traceparent)
    failed = record.error is not None
    return SpanIn(
        rollout_id=context.rollout_id,
        attempt_id=context.attempt_id,
        trace_id=trace_id,
        span_id=secrets.token_hex(8),
        parent_id=parent_id,
        name=semconv.LLM_SPAN_NAME if call.kind == "chat" else "text_completion",
        kind="CLIENT",
        start_time=context.start_time,
        end_time=end_time,
        attributes={key: value for key, value in attributes.items() if value is not None},
        status=SpanStatus(status_code="ERROR" if failed else "OK", description=record.error),
        resource={
            "service.name": SERVICE_NAME,
            semconv.ROLLOUT_ID: context.rollout_id,
            semconv.ATTEMPT_ID: context.attempt_id,
        },
    )
