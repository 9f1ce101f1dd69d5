"""OTLP/HTTP ingest: the stock exporter's spans land on their attempt; unbound or malformed exports are refused."""

from __future__ import annotations

import gzip

import httpx
import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

from lightningstore.client.store_client import StoreClient
from lightningstore.semconv import ATTEMPT_ID, ROLLOUT_ID


def _export(
    url: str, resource: dict[str, object], *, compression: Compression = Compression.NoCompression
) -> None:
    """Emit a parent and a child span through the stock OTLP/HTTP protobuf exporter."""
    provider = TracerProvider(resource=Resource.create(resource))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces", compression=compression))
    )
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("agent.step", kind=SpanKind.SERVER) as parent:
        parent.set_attribute("lightningrl.llm.prompt_token_ids", [1, 2, 3])
        with tracer.start_as_current_span("chat", kind=SpanKind.CLIENT) as child:
            child.set_attributes(
                {
                    "gen_ai.request.model": "m",
                    "score": 0.5,
                    "ok": True,
                    "tags": ["a", "b"],
                    "logprob": float("-inf"),
                }
            )
            child.add_event("tool.called", {"tool": "calc"})
            child.set_status(Status(StatusCode.ERROR, "boom"))
    provider.shutdown()


async def test_stock_exporter_spans_land_on_their_attempt(live_server) -> None:
    async with StoreClient(live_server.url) as client:
        claim = await client.start_rollout({"q": 1})
        resource = {ROLLOUT_ID: claim.rollout_id, ATTEMPT_ID: claim.attempt_id, "service.name": "agent"}
        _export(live_server.url, resource)
        _export(live_server.url, resource, compression=Compression.Gzip)  # a second trace, gzipped
        spans = await client.query_spans(claim.rollout_id, claim.attempt_id)
    assert len(spans) == 4
    child, parent = spans[0], spans[1]  # the child ends (and is exported) first
    assert (parent.name, parent.kind, child.name, child.kind) == ("agent.step", "SERVER", "chat", "CLIENT")
    assert len(child.trace_id) == 32 and len(child.span_id) == 16 and child.trace_id == parent.trace_id
    assert child.parent_id == parent.span_id and parent.parent_id is None
    assert parent.attributes["lightningrl.llm.prompt_token_ids"] == [1, 2, 3]
    # JSON has no -inf: it is kept as OTLP's JSON string, not dropped to null (lightningstore.finite)
    assert child.attributes == {
        "gen_ai.request.model": "m",
        "score": 0.5,
        "ok": True,
        "tags": ["a", "b"],
        "logprob": "-Infinity",
    }
    assert child.events[0].name == "tool.called" and child.events[0].attributes == {"tool": "calc"}
    assert child.status.status_code == "ERROR" and child.status.description == "boom"
    assert child.start_time is not None and child.end_time >= child.start_time > 1e9
    assert child.resource["service.name"] == "agent" and child.resource[ROLLOUT_ID] == claim.rollout_id
    assert (await StoreClient(live_server.url).get_rollout_by_id(claim.rollout_id)).status == "running"


def _json_export(span: dict[str, object], resource_attrs: list[dict[str, object]]) -> bytes:
    return orjson.dumps(
        {"resourceSpans": [{"resource": {"attributes": resource_attrs}, "scopeSpans": [{"spans": [span]}]}]}
    )


async def test_otlp_json_with_span_level_ids(sql_store, raw_http) -> None:
    claim = await sql_store.start_rollout(1)
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "parentSpanId": "eee19b7ec3c1b173",
        "name": "tool.search",
        "kind": 3,
        "startTimeUnixNano": "1544712660000000000",
        "endTimeUnixNano": "1544712661000000000",
        "attributes": [
            {"key": ROLLOUT_ID, "value": {"stringValue": claim.rollout_id}},
            {"key": ATTEMPT_ID, "value": {"stringValue": claim.attempt_id}},
            {"key": "n", "value": {"intValue": "42"}},
            {"key": "ids", "value": {"arrayValue": {"values": [{"intValue": "7"}, {"intValue": "8"}]}}},
            {"key": "lp", "value": {"doubleValue": "NaN"}},
        ],
        "events": [{"name": "e", "timeUnixNano": "1544712660500000000"}],
        "status": {"code": 1},
    }
    response = await raw_http.post(
        "/v1/traces", content=_json_export(span, []), headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text
    (stored,) = await sql_store.query_spans(claim.rollout_id)
    assert stored.trace_id == span["traceId"] and stored.span_id == span["spanId"]
    assert stored.parent_id == "eee19b7ec3c1b173" and stored.kind == "CLIENT"
    assert stored.start_time == 1544712660.0 and stored.end_time == 1544712661.0
    assert (
        stored.attributes["n"] == 42
        and stored.attributes["ids"] == [7, 8]
        and stored.attributes["lp"] == "NaN"
    )
    assert stored.events[0].timestamp == 1544712660.5 and stored.status.status_code == "OK"
    again = await raw_http.post(
        "/v1/traces",
        content=gzip.compress(_json_export(span, [])),
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )
    assert again.status_code == 200 and len(await sql_store.query_spans(claim.rollout_id)) == 1  # idempotent


async def test_unbound_and_malformed_exports_are_refused(sql_store, raw_http) -> None:
    unbound = {"traceId": "01" * 16, "spanId": "02" * 8, "name": "orphan", "kind": 1}
    json_headers = {"content-type": "application/json"}
    response = await raw_http.post("/v1/traces", content=_json_export(unbound, []), headers=json_headers)
    assert response.status_code == 422
    assert "orphan" in response.json()["message"] and ROLLOUT_ID in response.json()["message"]
    cases = [
        (b"\xff\xff\xff", "application/x-protobuf", 400),
        (b"{not json", "application/json", 400),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', "application/json", 400),
        (b'{"resourceSpans": 3}', "application/json", 400),
        (b"{}", "text/plain", 415),
    ]
    for body, content_type, status in cases:
        response = await raw_http.post("/v1/traces", content=body, headers={"content-type": content_type})
        assert response.status_code == status, (body, response.text)
        assert response.json()["message"]
    bomb = gzip.compress(b"{" + b" " * 100_000 + b"}")
    response = await raw_http.post(
        "/v1/traces", content=bomb, headers={**json_headers, "content-encoding": "gzip"}
    )
    assert response.status_code == 422 and "limit" in response.json()["message"]
    assert (await sql_store.statistics()).total_spans == 0


@pytest.mark.parametrize("token_kind", ["agent", "algorithm"])
async def test_otlp_honours_agent_keys(make_client, secured_transport, tokens, token_kind: str) -> None:
    from lightningstore.auth import agent_key

    claim = await make_client("run-token").start_rollout(1)
    token = (
        agent_key(tokens["agent_secret"], claim.rollout_id, claim.attempt_id)
        if token_kind == "agent"
        else "alg-token"
    )
    span = {
        "traceId": "01" * 16,
        "spanId": "02" * 8,
        "name": "s",
        "attributes": [
            {"key": ROLLOUT_ID, "value": {"stringValue": claim.rollout_id}},
            {"key": ATTEMPT_ID, "value": {"stringValue": claim.attempt_id}},
        ],
    }
    async with httpx.AsyncClient(transport=secured_transport, base_url="http://127.0.0.1") as http:
        response = await http.post(
            "/v1/traces",
            content=_json_export(span, []),
            headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
        )
    assert response.status_code == (200 if token_kind == "agent" else 403), response.text
