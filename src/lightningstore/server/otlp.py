"""OTLP/HTTP trace decoding (protobuf and JSON) into SpanIn, bound to attempts by `lightningrl.*` ids."""

from __future__ import annotations

import base64
import zlib
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as OtlpSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status
from pydantic import ValidationError

from lightningstore.data.span import SpanEvent, SpanIn, SpanStatus
from lightningstore.errors import InvalidInputError
from lightningstore.semconv import ATTEMPT_ID, ROLLOUT_ID

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
ID_FIELDS = ("traceId", "spanId", "parentSpanId")


class OtlpDecodeError(InvalidInputError):
    """The body is not a valid OTLP trace export."""

    http_status = 400


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """Undo `Content-Encoding: gzip|deflate`, refusing output over `limit` bytes."""
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise OtlpDecodeError("content-encoding", f"unsupported encoding {encoding!r} (use gzip or deflate)")
    inflater = zlib.decompressobj(zlib.MAX_WBITS | (16 if encoding == "gzip" else 0))
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise OtlpDecodeError("body", f"invalid {encoding} data: {exc}") from exc
    if len(out) > limit:
        raise InvalidInputError("body", f"decompressed body exceeds the limit of {limit} bytes")
    return out


def decode_request(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    """Parse an ExportTraceServiceRequest from protobuf or OTLP JSON (hex ids, string int64s)."""
    request = ExportTraceServiceRequest()
    if content_type == PROTOBUF:
        try:
            request.ParseFromString(body)
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise OtlpDecodeError("body", f"invalid OTLP protobuf: {exc}") from exc
        return request
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OtlpDecodeError("body", f"invalid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise OtlpDecodeError("body", f"OTLP JSON must be an object, got {type(data).__name__}")
    _hex_ids_to_base64(data)
    try:
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, ValueError, RecursionError) as exc:
        raise OtlpDecodeError("body", f"invalid OTLP JSON: {exc}") from exc
    return request


def _hex_ids_to_base64(data: dict[str, Any]) -> None:
    """OTLP JSON writes ids as hex; protobuf's JSON parser expects base64 for bytes fields."""
    for i, resource_spans in enumerate(_list(data, "resourceSpans", "body")):
        for j, scope_spans in enumerate(_list(resource_spans, "scopeSpans", f"resourceSpans[{i}]")):
            where = f"resourceSpans[{i}].scopeSpans[{j}]"
            for k, span in enumerate(_list(scope_spans, "spans", where)):
                _convert_ids(span, f"{where}.spans[{k}]")
                for m, link in enumerate(_list(span, "links", f"{where}.spans[{k}]")):
                    _convert_ids(link, f"{where}.spans[{k}].links[{m}]")


def _list(parent: Any, key: str, where: str) -> list[Any]:
    if not isinstance(parent, dict):
        raise OtlpDecodeError(where, f"must be an object, got {type(parent).__name__}")
    value = parent.get(key, [])
    if not isinstance(value, list):
        raise OtlpDecodeError(f"{where}.{key}", f"must be a list, got {type(value).__name__}")
    return value


def _convert_ids(obj: Any, where: str) -> None:
    if not isinstance(obj, dict):
        raise OtlpDecodeError(where, f"must be an object, got {type(obj).__name__}")
    for key in ID_FIELDS:
        value = obj.get(key)
        if value is None:
            continue
        try:
            obj[key] = base64.b64encode(bytes.fromhex(value)).decode("ascii")
        except (TypeError, ValueError):
            raise OtlpDecodeError(f"{where}.{key}", f"must be a hex string, got {value!r:.80}") from None


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return getattr(value, which)


def _attributes(pairs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        out[pair.key] = _value(pair.value)
    return out


def _seconds(nanos: int) -> float | None:
    return nanos / 1e9 if nanos else None


def _kind(kind: int) -> str:
    name = OtlpSpan.SpanKind.Name(kind) if kind in OtlpSpan.SpanKind.values() else "SPAN_KIND_INTERNAL"
    return "INTERNAL" if name == "SPAN_KIND_UNSPECIFIED" else name.removeprefix("SPAN_KIND_")


def _status(status: Status) -> SpanStatus:
    code = Status.StatusCode.Name(status.code) if status.code in Status.StatusCode.values() else "UNSET"
    return SpanStatus(status_code=code.removeprefix("STATUS_CODE_"), description=status.message or None)


def to_spans(request: ExportTraceServiceRequest) -> list[SpanIn]:
    """Every span of the export as a SpanIn; any span not bound to an attempt rejects the whole export."""
    spans: list[SpanIn] = []
    problems: list[str] = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for otlp_span in scope_spans.spans:
                attributes = _attributes(otlp_span.attributes)
                label = f"span {otlp_span.name!r} (span_id {otlp_span.span_id.hex() or '<empty>'})"
                rollout_id = attributes.get(ROLLOUT_ID, resource.get(ROLLOUT_ID))
                attempt_id = attributes.get(ATTEMPT_ID, resource.get(ATTEMPT_ID))
                if not (
                    isinstance(rollout_id, str) and rollout_id and isinstance(attempt_id, str) and attempt_id
                ):
                    problems.append(
                        f"{label} names no attempt: set {ROLLOUT_ID} and {ATTEMPT_ID} "
                        "on its resource or its attributes"
                    )
                    continue
                try:
                    spans.append(_to_span(otlp_span, rollout_id, attempt_id, attributes, resource))
                except ValidationError as exc:
                    first = exc.errors()[0]
                    field = ".".join(str(p) for p in first["loc"])
                    problems.append(f"{label}: {field}: {first['msg']}")
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise InvalidInputError("spans", "; ".join(problems[:3]) + more)
    return spans


def _to_span(
    span: OtlpSpan, rollout_id: str, attempt_id: str, attributes: dict[str, Any], resource: dict[str, Any]
) -> SpanIn:
    return SpanIn(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_id=span.parent_span_id.hex() or None,
        name=span.name,
        kind=_kind(span.kind),
        start_time=_seconds(span.start_time_unix_nano),
        end_time=_seconds(span.end_time_unix_nano),
        attributes=attributes,
        events=[
            SpanEvent(name=e.name, timestamp=_seconds(e.time_unix_nano), attributes=_attributes(e.attributes))
            for e in span.events
        ],
        status=_status(span.status),
        resource=resource,
    )


def response_body(content_type: str) -> bytes:
    """The success answer in the request's encoding."""
    if content_type == PROTOBUF:
        return ExportTraceServiceResponse().SerializeToString()
    return b'{"partialSuccess":{}}'
