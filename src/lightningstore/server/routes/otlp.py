"""OTLP/HTTP trace ingest: `POST /v1/traces` in protobuf or JSON; spans land on their attempts."""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response
from starlette.exceptions import HTTPException

from lightningstore.auth.agent_writes import refuse_training_attributes, require_live_attempt
from lightningstore.http_api import OtlpAccepted
from lightningstore.server import otlp
from lightningstore.server.auth import context

REQUEST_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            otlp.PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
            otlp.JSON: {"schema": {"type": "object", "description": "OTLP JSON ExportTraceServiceRequest"}},
        },
    }
}

ROUTE_OPTIONS: dict[str, Any] = {
    "response_model": OtlpAccepted,
    "openapi_extra": REQUEST_BODY,
    "responses": {200: {"content": {otlp.PROTOBUF: {}}}},
}
"""`add_api_route` arguments: the body is read by hand, so the OpenAPI document is told its two encodings."""


async def export_traces(request: Request) -> Response:
    """Store every span of an OTLP export (all or none); each must carry lightningrl rollout/attempt ids.

    An agent key writes only its live attempt's spans, and none with the proxy's training attributes (403).
    """
    store, caller = context(request)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in (otlp.PROTOBUF, otlp.JSON):
        raise HTTPException(415, f"content-type must be {otlp.PROTOBUF} or {otlp.JSON}, got {content_type!r}")
    encoding = request.headers.get("content-encoding", "").strip().lower()
    body = otlp.decompress(await request.body(), encoding, request.app.state.max_body_bytes)
    spans = otlp.to_spans(otlp.decode_request(body, content_type))
    for span in spans:
        caller.require_attempt(span.rollout_id, span.attempt_id)
    refuse_training_attributes(caller, spans)
    await require_live_attempt(store, caller)
    await store.add_many_spans(spans)
    return Response(otlp.response_body(content_type), media_type=content_type)
