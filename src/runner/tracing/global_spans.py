"""Spans that libraries start on the global TracerProvider, routed to the attempt they started in.

An agent already instrumented with OpenTelemetry (its own `trace.get_tracer(...)`, an
`opentelemetry-instrumentation-*` package, a framework's OTel instrumentor) records on the process's
global provider, not on the attempt's private one. `AttemptSpanRouter` sits on that global provider:
a span started while an attempt is current (the runner's contextvar, which asyncio tasks and the
runner's agent threads inherit) is handed, when it ends, to that attempt's attempt_tracer as a copy carrying
the attempt's resource attributes and ids. The library's own span is left as it was, so whatever
exporters the application set up still see it unchanged; spans started outside any attempt are not
touched.
"""

from __future__ import annotations

import logging
import threading

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan

from lightningstore.semconv import AGENT_NAME, ATTEMPT_ID, ROLLOUT_ID
from runner.tracing.context import current_agent_name, current_attempt
from runner.tracing.tracer import AttemptTracer

log = logging.getLogger("runner.tracing.global_spans")
DEFAULT_SERVICE_PREFIX = "unknown_service"


class AttemptSpanRouter(SpanProcessor):
    """On a global provider: spans started inside an attempt go to that attempt's attempt_tracer when they end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: dict[tuple[int, int], tuple[AttemptTracer, str | None]] = {}

    def on_start(self, span: SdkSpan, parent_context: otel_context.Context | None = None) -> None:
        attempt = current_attempt()
        if attempt is None:
            return
        key = (span.context.trace_id, span.context.span_id)
        with self._lock:
            self._owners[key] = (
                attempt.attempt_tracer,
                current_agent_name() or attempt.attempt_tracer.agent_name,
            )

    def on_end(self, span: ReadableSpan) -> None:
        context = span.get_span_context()
        if context is None:
            return
        with self._lock:
            owner = self._owners.pop((context.trace_id, context.span_id), None)
        if owner is not None:
            attempt_tracer, agent = owner
            attempt_tracer.collect(for_attempt(span, attempt_tracer, agent))

    @property
    def open_spans(self) -> int:
        """Spans started inside an attempt that have not ended yet."""
        with self._lock:
            return len(self._owners)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def for_attempt(span: ReadableSpan, attempt_tracer: AttemptTracer, agent: str | None) -> ReadableSpan:
    """A copy of `span` under the attempt's resource, tagged with its ids (and agent name unless set).

    The attempt's resource attributes win, except a `service.name` the application chose itself: that
    keeps naming the library's process."""
    ours = dict(attempt_tracer.resource.attributes)
    theirs = dict(span.resource.attributes) if span.resource is not None else {}
    service = theirs.get("service.name")
    if isinstance(service, str) and not service.startswith(DEFAULT_SERVICE_PREFIX):
        ours["service.name"] = service
    attributes = dict(span.attributes or {})
    attributes[ROLLOUT_ID] = attempt_tracer.rollout_id
    attributes[ATTEMPT_ID] = attempt_tracer.attempt_id
    if agent and AGENT_NAME not in attributes:
        attributes[AGENT_NAME] = agent
    return ReadableSpan(
        name=span.name,
        context=span.get_span_context(),
        parent=span.parent,
        resource=Resource({**theirs, **ours}),
        attributes=attributes,
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


_router = AttemptSpanRouter()
_install_lock = threading.Lock()
_routed: set[int] = set()


def global_span_router() -> AttemptSpanRouter:
    """The process's one router (the processor `capture_global_spans` adds)."""
    return _router


def capture_global_spans() -> bool:
    """Route the global provider's attempt spans to their attempts; False when that provider cannot.

    With no global provider set yet, an SDK `TracerProvider` is installed as the global one (an
    application that sets its own should do so before the runner starts: OpenTelemetry keeps the
    first). Idempotent; the router is added to a provider once."""
    with _install_lock:
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):
            trace.set_tracer_provider(TracerProvider())
            provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            log.warning(
                "the global TracerProvider is a %s, not the OpenTelemetry SDK's: spans libraries record "
                "on it are not captured into attempts",
                type(provider).__name__,
            )
            return False
        if id(provider) not in _routed:
            provider.add_span_processor(_router)
            _routed.add(id(provider))
        return True
