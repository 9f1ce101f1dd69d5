"""JSON bodies no store can keep (nested too deep, a lone surrogate) get 400 with a reason on every route
that takes a body, and the keep-alive connection they came on stays open for the next request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from backends import LiveServer

from lightningstore.client.store_client import StoreClient
from lightningstore.server import build_app
from lightningstore.server.json_guard import MAX_JSON_DEPTH, json_refusal

BODY_METHODS = ("post", "put", "patch")


def body_routes() -> list[tuple[str, str]]:
    """(method, path) of every operation in the server's route table that takes a body."""
    app = build_app(StoreClient("http://unused.test"), sweep_interval=None)
    paths = app.openapi()["paths"]
    return [(m.upper(), p) for p, ops in paths.items() for m in ops if m in BODY_METHODS]


ROUTES = body_routes()


def nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


BAD_BODIES = {
    "nested 201 deep": (nested(MAX_JSON_DEPTH + 1), f"JSON nested deeper than {MAX_JSON_DEPTH}"),
    "nested 255 deep": (b"[" * 255 + b"]" * 255, f"JSON nested deeper than {MAX_JSON_DEPTH}"),
    "nested 1000 deep": (
        b'{"x": ' + b"[" * 1000 + b"]" * 1000 + b"}",
        f"JSON nested deeper than {MAX_JSON_DEPTH}",
    ),
    "lone high surrogate": (rb'{"input": "\ud800", "name": "x"}', "lone UTF-16 surrogate"),
    "lone low surrogate": (rb'[{"input": {"k": "a\udc00b"}}]', "lone UTF-16 surrogate"),
    "high surrogate, no low": (rb'{"metadata": {"\ud83d\u0041": 1}}', "lone UTF-16 surrogate"),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    where: Path = tmp_path_factory.mktemp("json-bodies")
    live = LiveServer(where / "store.db", where / "server.log").start()
    yield live
    live.stop()


def test_the_route_table_covers_the_json_routes() -> None:
    found = set(ROUTES)
    assert ("POST", "/v1/traces") in found  # OTLP's JSON encoding
    assert ("POST", "/v1/spans") in found and ("PUT", "/v1/pointers") in found
    assert ("PATCH", "/v1/rollouts/{rollout_id}/attempts/{attempt_id}") in found  # a hot route
    proxy = "/proxy/rollout/{rollout_id}/attempt/{attempt_id}/mode/{mode}/v1/chat/completions"
    assert ("POST", proxy) in found  # the model gateway reads its bodies itself
    assert ("PUT", "/v1/gate/policies") in found
    assert len(ROUTES) >= 30


def _client_port(response: httpx.Response) -> int:
    return response.extensions["network_stream"].get_extra_info("socket").getsockname()[1]


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_bad_json_is_400_and_keeps_the_connection(server: LiveServer, method: str, path: str) -> None:
    url = path.replace("{mode}", "train").replace("{", "").replace("}", "")  # ids: their names
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    with httpx.Client(base_url=server.url, limits=limits, timeout=30.0) as client:
        ports = set()
        for name, (body, reason) in BAD_BODIES.items():
            response = client.request(method, url, content=body, headers={"content-type": "application/json"})
            assert response.status_code == 400, (name, response.text)
            answer = response.json()
            assert reason in answer["message"], (name, answer)
            assert answer["code"] == "bad_request" and answer["details"]["field"] == "body"
            assert response.headers.get("connection") != "close", name
            ports.add(_client_port(response))
        after = client.get("/healthz")
        assert after.status_code == 200
        ports.add(_client_port(after))
        assert len(ports) == 1, ports  # one keep-alive connection carried every request


def test_the_limit_and_surrogate_pairs_are_accepted(server: LiveServer) -> None:
    """Exactly MAX_JSON_DEPTH levels pass, and so does an escaped surrogate pair (an emoji)."""
    inner = json.loads(b"[" * (MAX_JSON_DEPTH - 3) + b'"\\ud83d\\ude00"' + b"]" * (MAX_JSON_DEPTH - 3))
    body = json.dumps([{"input": {"deep": inner}}]).encode()
    assert body.count(b"[") + body.count(b"{") == MAX_JSON_DEPTH and json_refusal(body) is None
    response = httpx.post(
        f"{server.url}/v1/rollouts", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text
    stored = response.json()[0]["input"]["deep"]
    assert stored == inner
    assert json_refusal(nested(MAX_JSON_DEPTH)) is None


def test_malformed_json_is_left_to_the_route() -> None:
    """Only depth and surrogates are decided here: other bad JSON gets the route's own answer."""
    assert json_refusal(rb'{"x": "\u12"}') is None
    assert json_refusal(rb'{"x": "\\ud800"}') is None  # an escaped backslash, then text
