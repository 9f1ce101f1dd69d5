"""Where finished spans go: straight into an in-process store, or OTLP/HTTP to the store server."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from lightningstore import LightningStore
from runner.tracing.span_convert import to_span_in


class SpanSinkError(RuntimeError):
    """A batch of spans could not be delivered."""


class SpanSink(Protocol):
    async def write(self, spans: Sequence[ReadableSpan], rollout_id: str, attempt_id: str) -> None:
        """Deliver the spans of one attempt, all or none (raise SpanSinkError)."""
        ...

    def close(self) -> None:
        """Release what the sink holds."""
        ...


class StoreSink:
    """Spans into a store object with `add_many_spans` (one transaction per batch)."""

    def __init__(self, store: LightningStore) -> None:
        self.store = store

    async def write(self, spans: Sequence[ReadableSpan], rollout_id: str, attempt_id: str) -> None:
        if spans:
            await self.store.add_many_spans([to_span_in(s, rollout_id, attempt_id) for s in spans])

    def close(self) -> None:
        return None


class OtlpSink:
    """Spans to the server's `/v1/traces` with the stock OTLP/HTTP (protobuf) exporter."""

    def __init__(self, endpoint: str, headers: dict[str, str] | None = None, timeout: float = 10.0) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        self.endpoint = endpoint
        self.headers = dict(headers or {})
        self._exporter = OTLPSpanExporter(endpoint=endpoint, headers=self.headers, timeout=timeout)

    async def write(self, spans: Sequence[ReadableSpan], rollout_id: str, attempt_id: str) -> None:
        if not spans:
            return
        # The exporter is blocking (requests); keep the event loop free.
        result = await asyncio.to_thread(self._exporter.export, list(spans))
        if result is not SpanExportResult.SUCCESS:
            raise SpanSinkError(f"OTLP export of {len(spans)} span(s) to {self.endpoint} failed")

    def close(self) -> None:
        self._exporter.shutdown()


class SharedSink:
    """One sink used by many attempts: `close()` per attempt is a no-op; its owner closes `sink`."""

    def __init__(self, sink: SpanSink) -> None:
        self.sink = sink

    async def write(self, spans: Sequence[ReadableSpan], rollout_id: str, attempt_id: str) -> None:
        await self.sink.write(spans, rollout_id, attempt_id)

    def close(self) -> None:
        return None
