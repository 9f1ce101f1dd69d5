"""Conversion of finished OpenTelemetry SDK spans into the store's SpanIn."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from lightningstore import SpanEvent, SpanIn, SpanStatus
from lightningstore.semconv import ATTEMPT_ID, ROLLOUT_ID


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {key: _plain(value) for key, value in (attributes or {}).items()}


def _seconds(nanos: int | None) -> float | None:
    return nanos / 1e9 if nanos else None


def to_span_in(span: ReadableSpan, rollout_id: str, attempt_id: str) -> SpanIn:
    """The store's form of `span`; its own lightningrl ids win over the given ones."""
    attributes = _attributes(span.attributes)
    resource = _attributes(span.resource.attributes)
    context = span.get_span_context()
    assert context is not None, "a finished SDK span always has a context"
    return SpanIn(
        rollout_id=str(attributes.get(ROLLOUT_ID, rollout_id)),
        attempt_id=str(attributes.get(ATTEMPT_ID, attempt_id)),
        trace_id=format(context.trace_id, "032x"),
        span_id=format(context.span_id, "016x"),
        parent_id=format(span.parent.span_id, "016x") if span.parent is not None else None,
        name=span.name,
        kind=span.kind.name,
        start_time=_seconds(span.start_time),
        end_time=_seconds(span.end_time),
        attributes=attributes,
        events=[
            SpanEvent(name=e.name, timestamp=_seconds(e.timestamp), attributes=_attributes(e.attributes))
            for e in span.events
        ],
        status=SpanStatus(status_code=span.status.status_code.name, description=span.status.description),
        resource=resource,
    )
