"""The one LLM span a proxied call becomes, with the semconv keys credit assignment reads."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

from lightningstore import semconv
from lightningstore.data.span import SpanIn, SpanStatus
from lightningstore.llm_call import llm_call_attributes, span_name
from lightningstore.llm_record import CallRecord
from lightningstore.proxy.binding import BoundLLM
from lightningstore.proxy.request import CallRequest

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
    decision: str | None = None
    """The `x-lightningrl-decision` header: the kind of decision the agent says this call makes."""


def _trace_ids(traceparent: str | None) -> tuple[str, str | None]:
    """(trace_id, parent span id): the agent's W3C trace when it sent one, else a new trace."""
    match = _TRACEPARENT.match(traceparent.strip().lower()) if traceparent else None
    if match and set(match.group(1)) != {"0"}:
        return match.group(1), match.group(2)
    return secrets.token_hex(16), None


def build_span(
    context: CallContext, call: CallRequest, bound: BoundLLM, record: CallRecord, end_time: float
) -> SpanIn:
    """The SpanIn for one call; status ERROR with the upstream's reason when it failed."""
    attributes: dict[str, Any] = {
        semconv.ROLLOUT_ID: context.rollout_id,
        semconv.ATTEMPT_ID: context.attempt_id,
        semconv.AGENT_NAME: context.agent_name,
        semconv.DECISION: context.decision,
        # The upstream body: the resource's model and sampling as sent, the agent's messages; and the
        # agent's own temperature/top_p where the mode's rewrite replaced them.
        **llm_call_attributes(call.kind, call.body, record, bound.llm.provider, call.original),
        semconv.LLM_UPSTREAM: record.upstream,
        semconv.LLM_RETRIES: record.retries,
        semconv.LLM_LATENCY_MS: round((end_time - context.start_time) * 1000.0, 3),
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
        name=span_name(call.kind),
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
