"""The server's fast path (lightningstore.server.fast_path) answers exactly as the FastAPI routes do.

A query string sends a request through FastAPI instead (the fast path only takes bare hot routes), so
each case here sends the same request both ways and compares the answers.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest

from lightningstore import SqlStore
from lightningstore.server import fast_path

JSON = {"content-type": "application/json"}


async def both(
    http: httpx.AsyncClient, method: str, path: str, body: bytes, **headers: str
) -> list[httpx.Response]:
    """The answer of the fast path, then FastAPI's (`?via=fastapi`)."""
    return [
        await http.request(method, path + suffix, content=body, headers={**JSON, **headers})
        for suffix in ("", "?via=fastapi")
    ]


def span(rollout_id: str, attempt_id: str, span_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "rollout_id": rollout_id,
        "attempt_id": attempt_id,
        "trace_id": "t1",
        "span_id": span_id,
        "name": "chat",
        "attributes": {"ids": [1, 2, 3], "text": "héllo"},
        **extra,
    }


async def test_hot_routes_answer_as_fastapi_does(raw_http: httpx.AsyncClient, sql_store: SqlStore) -> None:
    fast, slow = await both(
        raw_http, "POST", "/v1/rollouts", orjson.dumps([{"input": {"q": 1}, "rollout_id": "ro-1"}])
    )
    assert fast.status_code == slow.status_code == 200  # the second is an idempotent repeat
    assert fast.json() == slow.json() and fast.json()[0]["rollout_id"] == "ro-1"
    assert fast.headers["content-type"] == slow.headers["content-type"] == "application/json"

    claim = await raw_http.post("/v1/rollouts/dequeue", json={"limit": 1, "worker_id": "w"})
    assert claim.status_code == 200 and claim.json()[0]["rollout"]["rollout_id"] == "ro-1"
    attempt_id = claim.json()[0]["attempt"]["attempt_id"]
    empty = await both(raw_http, "POST", "/v1/rollouts/dequeue", b'{"limit": 2}')
    assert [r.status_code for r in empty] == [200, 200] and [r.json() for r in empty] == [[], []]

    body = orjson.dumps([span("ro-1", attempt_id, "s1"), span("ro-1", attempt_id, "s2", parent_id="s1")])
    fast, slow = await both(raw_http, "POST", "/v1/spans", body)
    assert fast.status_code == slow.status_code == 200
    assert fast.json() == slow.json()
    assert [s["sequence_id"] for s in fast.json()] == [
        s.sequence_id for s in await sql_store.query_spans("ro-1")
    ]
    for rollout_id in ("ro-1", "ro-none"):
        fast, slow = await both(raw_http, "GET", f"/v1/rollouts/{rollout_id}/spans", b"")
        assert fast.status_code == slow.status_code == 200
        assert fast.json() == slow.json()
        assert fast.headers["content-type"] == slow.headers["content-type"] == "application/json"
    assert [s["span_id"] for s in fast.json()] == [] and len(slow.json()) == 0


async def test_spans_of_a_rollout_with_an_encoded_id_take_the_fast_path(
    raw_http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await raw_http.post("/v1/rollouts", json=[{"input": 1, "rollout_id": "ro/1 %x"}])
    claim = (await raw_http.post("/v1/rollouts/dequeue", json={})).json()[0]
    body = orjson.dumps([span("ro/1 %x", claim["attempt"]["attempt_id"], "s1")])
    assert (await raw_http.post("/v1/spans", content=body, headers=JSON)).status_code == 200
    served: list[str] = []
    (template,) = fast_path.HOT_TEMPLATES["GET"]  # GET /v1/rollouts/{rollout_id:id}/spans
    route = template.route

    async def counting(store: Any, caller: Any, body: Any, rollout_id: str) -> Any:
        served.append(rollout_id)
        return await route.run(store, caller, body, rollout_id)

    counted = template._replace(route=fast_path.HotRoute(route.body, counting, route.answer))
    monkeypatch.setitem(fast_path.HOT_TEMPLATES, "GET", (counted,))
    path = f"/v1/rollouts/{quote('ro/1 %x', safe='')}/spans"
    fast, slow = await both(raw_http, "GET", path, b"")
    assert fast.status_code == slow.status_code == 200 and fast.json() == slow.json()
    assert [s["span_id"] for s in fast.json()] == ["s1"]
    await raw_http.get(path + "?limit=1")
    await raw_http.get(path + "/")
    assert served == ["ro/1 %x"]


async def test_update_attempt_with_encoded_ids_answers_as_fastapi_does(raw_http: httpx.AsyncClient) -> None:
    await raw_http.post("/v1/rollouts", json=[{"input": 1, "rollout_id": "ro/1 %x"}])
    claim = (await raw_http.post("/v1/rollouts/dequeue", json={})).json()[0]
    path = f"/v1/rollouts/{quote('ro/1 %x', safe='')}/attempts/{claim['attempt']['attempt_id']}"
    fast, slow = await both(raw_http, "PATCH", path, b'{"metadata": {"k": 1}}')
    assert fast.status_code == slow.status_code == 200
    same = {k: v for k, v in fast.json().items() if "time" not in k}
    assert same == {k: v for k, v in slow.json().items() if "time" not in k} and same["metadata"] == {"k": 1}
    latest = path.rsplit("/", 1)[0] + "/latest"
    fast, slow = await both(
        raw_http, "PATCH", latest, b'{"status": "succeeded"}'
    )  # the same state again: a no-op
    assert fast.status_code == slow.status_code == 200
    assert fast.json()["status"] == slow.json()["status"] == "succeeded"
    fast, slow = await both(raw_http, "PATCH", latest, b'{"status": "running"}')
    assert fast.status_code == slow.status_code == 409 and fast.json() == slow.json()
    assert fast.json()["code"] == "illegal_transition"
    for body in (b'{"status": "sideways"}', b'{"metadata": 3}'):
        fast, slow = await both(raw_http, "PATCH", path, body)
        assert fast.status_code == slow.status_code == 422 and fast.json() == slow.json()
    fast, slow = await both(raw_http, "PATCH", "/v1/rollouts/ro-none/attempts/at-none", b"{}")
    assert fast.status_code == slow.status_code == 404 and fast.json() == slow.json()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/spans", b'[{"rollout_id": "ro-1"}]'),  # fields missing
        ("/v1/spans", b'[{"rollout_id": "ro-1",'),  # malformed JSON
        ("/v1/rollouts", b'[{"input": 1, "mode": "sideways"}]'),  # no such mode
        ("/v1/rollouts/dequeue", b'{"limit": 0}'),  # below the bound
        ("/v1/rollouts/dequeue", b'{"limit": 1, "extra": true}'),  # unknown field
        ("/v1/rollouts/dequeue", b"[]"),  # not an object
    ],
)
async def test_bad_input_gets_fastapi_answer(raw_http: httpx.AsyncClient, path: str, body: bytes) -> None:
    fast, slow = await both(raw_http, "POST", path, body)
    assert fast.status_code == slow.status_code and fast.status_code in (400, 422)
    assert fast.json() == slow.json()


async def test_store_errors_auth_and_body_limit_answer_as_fastapi_does(
    raw_http: httpx.AsyncClient, secured_transport: httpx.ASGITransport
) -> None:
    body = orjson.dumps([span("ro-x", "at-x", "s1")])
    fast, slow = await both(raw_http, "POST", "/v1/spans", body)
    assert fast.status_code == slow.status_code == 404 and fast.json() == slow.json()
    assert fast.json()["code"] == "not_found"

    too_big = orjson.dumps([span("ro-x", "at-x", f"s{k}", attributes={"text": "x" * 500}) for k in range(10)])
    fast, slow = await both(raw_http, "POST", "/v1/spans", too_big)
    assert fast.status_code == slow.status_code == 413 and fast.json() == slow.json()

    async with httpx.AsyncClient(transport=secured_transport, base_url="http://127.0.0.1") as secured:
        for headers in ({}, {"authorization": "Bearer nope"}, {"authorization": "Bearer run-token"}):
            fast, slow = await both(secured, "POST", "/v1/rollouts", b'[{"input": 1}]', **headers)
            assert fast.status_code == slow.status_code and fast.json() == slow.json()
            assert fast.status_code in (401, 403)
        fast, slow = await both(
            secured, "POST", "/v1/rollouts/dequeue", b"{}", authorization="Bearer run-token"
        )
        assert fast.status_code == slow.status_code == 200 and fast.json() == slow.json() == []
        for headers in ({}, {"authorization": "Bearer nope"}):
            fast, slow = await both(secured, "GET", "/v1/rollouts/ro-x/spans", b"", **headers)
            assert fast.status_code == slow.status_code == 401 and fast.json() == slow.json()


async def test_only_bare_json_requests_to_hot_routes_take_the_fast_path(
    raw_http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    served: list[str] = []
    route = fast_path.HOT_PATHS[("POST", "/v1/rollouts/dequeue")]

    async def counting(store: Any, caller: Any, body: Any) -> Any:
        served.append("fast")
        return await route.run(store, caller, body)

    monkeypatch.setitem(
        fast_path.HOT_PATHS,
        ("POST", "/v1/rollouts/dequeue"),
        fast_path.HotRoute(route.body, counting, route.answer),
    )
    await raw_http.post("/v1/rollouts/dequeue", content=b"{}", headers=JSON)
    await raw_http.post(
        "/v1/rollouts/dequeue", content=b"{}", headers={"content-type": "application/json; charset=utf-8"}
    )
    await raw_http.post("/v1/rollouts/dequeue?x=1", content=b"{}", headers=JSON)
    await raw_http.post("/v1/rollouts/dequeue", content=b"{}", headers={"content-type": "text/plain"})
    await raw_http.post("/v1/rollouts/dequeue", content=b'{"limit": -1}', headers=JSON)
    assert served == ["fast", "fast"]


async def test_hot_routes_are_answered_ahead_of_the_stack_only_when_no_middleware_applies(
    sql_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from starlette.types import Receive, Scope, Send

    from lightningstore.server import build_app

    seen: list[str] = []

    class Tagging:
        """A middleware added after build_app: it must still see every request."""

        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            seen.append(scope.get("path", ""))
            await self.app(scope, receive, send)

    early: list[str] = []
    serve_hot = fast_path.serve_hot

    async def counting(route: Any, ids: Any, scope: Scope, *rest: Any) -> None:
        early.append(scope["path"])
        await serve_hot(route, ids, scope, *rest)

    import lightningstore.server.app as app_module

    monkeypatch.setattr(app_module, "serve_hot", counting)
    # Telemetry is not this test's subject: in the full suite an earlier test leaves FastAPI's telemetry
    # state such that `_telemetry_on` says yes (then nothing is answered early, which is correct).
    monkeypatch.setattr(app_module, "_telemetry_on", lambda app: False)
    app = build_app(sql_store, sweep_interval=None, max_body_bytes=4096)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        assert (await http.post("/v1/rollouts/dequeue", json={})).json() == []
        too_big = {**JSON, "content-length": "99999"}  # over the limit: the whole stack answers 413
        assert (await http.post("/v1/rollouts/dequeue", content=b"{}", headers=too_big)).status_code == 413
        assert (await http.get("/v1/rollouts/ro%2F1/spans")).json() == []
        assert early == ["/v1/rollouts/dequeue", "/v1/rollouts/ro%2F1/spans"]
        bad = await http.post("/v1/rollouts/dequeue", json={"limit": 0})  # replayed through the whole app
        assert bad.status_code == 422 and early[-1] == "/v1/rollouts/dequeue"
    tagged = build_app(sql_store, sweep_interval=None)
    tagged.add_middleware(Tagging)
    early.clear()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=tagged), base_url="http://127.0.0.1"
    ) as http:
        assert (await http.post("/v1/rollouts/dequeue", json={})).json() == []
    assert early == [] and seen == ["/v1/rollouts/dequeue"]
    limited = build_app(sql_store, sweep_interval=None, rate_limit=100.0)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=limited), base_url="http://127.0.0.1"
    ) as http:
        assert (await http.post("/v1/rollouts/dequeue", json={})).json() == []
    assert early == []


def test_fastapi_telemetry_is_asked_at_most_once_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    import lightningstore.server.app as app_module

    class Native:
        def __init__(self) -> None:
            self.asked = 0
            self.on = False

        def enabled(self) -> bool:
            self.asked += 1
            return self.on

    app = app_module.StoreApp()
    native = Native()
    app._native_telemetry = native  # type: ignore[attr-defined]
    clock = [100.0]
    monkeypatch.setattr(app_module.time, "monotonic", lambda: clock[0])
    assert app_module._telemetry_on(app) is False and app_module._telemetry_on(app) is False
    assert native.asked == 1
    native.on = True  # a tracer provider configured while the server runs
    clock[0] += app_module.TELEMETRY_RECHECK_SECONDS
    assert app_module._telemetry_on(app) is True and native.asked == 2
