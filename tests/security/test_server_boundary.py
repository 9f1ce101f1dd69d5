"""The store server's boundary against a hostile web page and a greedy agent, on real uvicorn servers on
127.0.0.1: without tokens only loopback Host names and no cross-site write; an unknown caller's body
is refused before it is read; an agent key's attempt has a quota (role tokens have none)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from backends import LiveServer

from lightningrl.fitting.local_stack import serve_app
from lightningstore import LLM, AttemptedRollout, SpanIn, SqlStore, semconv
from lightningstore.auth import TokenConfig
from lightningstore.client.store_client import StoreClient
from lightningstore.errors import QuotaExceededError
from lightningstore.server import build_app
from lightningstore.server.attempt_quota import AttemptQuota

ADMIN, RUNNER, SECRET = "boundary-admin", "boundary-runner", "boundary-agent-secret"
REBOUND = "rebind.attacker.example"
EVIL = "https://evil.example"


@contextlib.asynccontextmanager
async def running(tmp_path: Path, **app_options: Any) -> AsyncIterator[tuple[str, SqlStore]]:
    """A real uvicorn server on 127.0.0.1 serving `build_app(store, **app_options)`; its URL and store."""
    store = SqlStore(tmp_path / "store.db")
    try:
        async with serve_app(build_app(store, sweep_interval=None, **app_options)) as url:
            yield url, store
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def with_tokens(
    tmp_path: Path, quota: AttemptQuota | None = None
) -> AsyncIterator[tuple[str, SqlStore]]:
    tokens = TokenConfig.from_mapping({"admin": ADMIN, "runner": RUNNER, "agent_secret": SECRET})
    options: dict[str, Any] = (
        {"tokens": tokens} if quota is None else {"tokens": tokens, "attempt_quota": quota}
    )
    async with running(tmp_path, **options) as served:
        yield served


# ---- finding 3: DNS rebinding and cross-site writes to a dev-mode server --------------------------


async def test_a_rebound_host_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    async with running(tmp_path) as (url, store), StoreClient(url, max_retries=0) as local:
        llm = LLM(endpoints=["http://127.0.0.1:9/v1"], model="policy")
        v1 = await local.add_resource_version("llm", llm)
        v2 = await local.add_resource_version(
            "llm", llm.model_copy(update={"model": "v2"}), parent_id=v1.version_id
        )
        await local.move_pointer("llm", "approved", v1.version_id, actor="local")
        elsewhere = LLM(endpoints=["https://attacker.example/v1"], model="policy")
        publish = {"name": "llm", "resource": elsewhere.model_dump(mode="json"), "created_by": "page"}
        approve = {"name": "llm", "pointer": "approved", "version_id": v2.version_id, "actor": "page"}
        async with httpx.AsyncClient(base_url=url, headers={"host": REBOUND}) as page:
            answers = [
                await page.get("/ui/rollouts"),
                await page.get("/v1/statistics"),
                await page.post("/v1/resource-versions", json=publish),
                await page.put("/v1/pointers", json=approve),
            ]
        for answer in answers:
            assert answer.status_code == 421, answer.text
            assert REBOUND in answer.json()["message"] and "loopback" in answer.json()["message"]
        versions = await local.list_resource_versions("llm")
        assert [v.version_id for v in versions] == [v1.version_id, v2.version_id]
        approved = await store.get_pointer("llm", "approved")
        assert approved is not None and approved.version_id == v1.version_id


async def test_a_cross_site_post_cannot_pause_the_gateway(tmp_path: Path) -> None:
    async with running(tmp_path) as (url, _), httpx.AsyncClient(base_url=url) as http:
        # What a page on any site sends with fetch(..., {mode: "no-cors"}) or a form: no preflight.
        browser = {"content-type": "text/plain", "origin": EVIL, "sec-fetch-site": "cross-site"}
        refused = await http.post("/proxy/admin/pause", content=b"x", headers=browser)
        assert refused.status_code == 403 and "Sec-Fetch-Site: cross-site" in refused.json()["message"]
        older = await http.post("/proxy/admin/pause", headers={"origin": EVIL})  # no Sec-Fetch-Site
        assert older.status_code == 403 and EVIL in older.json()["message"]
        sandboxed = await http.post("/proxy/admin/pause", headers={"origin": "null"})
        assert sandboxed.status_code == 403
        text = await http.post("/proxy/admin/pause", content=b"x", headers={"content-type": "text/plain"})
        assert text.status_code == 415 and "text/plain" in text.json()["message"]
        form = await http.post("/v1/rollouts", data={"input": "1"})
        assert form.status_code == 415 and "x-www-form-urlencoded" in form.json()["message"]
        status = await http.get("/proxy/admin/status")
        assert status.status_code == 200 and status.json()["paused"] is False
        assert (await http.get("/v1/statistics")).json()["total_rollouts"] == 0


async def test_loopback_pages_and_clients_still_write(tmp_path: Path) -> None:
    async with running(tmp_path) as (url, _):
        port = url.rsplit(":", 1)[1]
        same_origin = {"origin": url, "sec-fetch-site": "same-origin"}
        async with httpx.AsyncClient(base_url=url) as http:
            ok = await http.post("/v1/rollouts", json=[{"input": 1}], headers=same_origin)
            assert ok.status_code == 200, ok.text
            for host in (f"localhost:{port}", f"[::1]:{port}", "127.0.0.2"):
                answer = await http.post("/v1/rollouts", json=[{"input": 2}], headers={"host": host})
                assert answer.status_code == 200, (host, answer.text)
            paused = await http.post("/proxy/admin/pause", headers={"origin": f"http://localhost:{port}"})
            assert paused.status_code == 200 and paused.json()["paused"] is True
            assert (await http.get("/ui/rollouts")).status_code == 200


# ---- finding 4: a write's caller is decided before its body is read -------------------------------


def _head(path: str, port: int, size: int, auth: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"{auth}content-length: {size}\r\n\r\n"
    ).encode()


async def test_an_unknown_callers_body_is_not_read(tmp_path: Path) -> None:
    size = 29 * 1024 * 1024
    async with with_tokens(tmp_path) as (url, store):
        port = int(url.rsplit(":", 1)[1])
        for path, auth in (("/v1/spans", ""), ("/v1/rewards", "authorization: Bearer guessed\r\n")):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                started = time.perf_counter()
                writer.write(_head(path, port, size, auth) + b"[" + b" " * 65_535)  # 64 KiB of the 29 MB
                await writer.drain()
                status = await asyncio.wait_for(reader.readline(), timeout=3.0)
                elapsed = time.perf_counter() - started
                assert status.startswith(b"HTTP/1.1 401"), status
                assert elapsed < 0.2, f"401 after {elapsed:.3f} s"
                # The rest of the body never comes, and the server answers others meanwhile.
                async with httpx.AsyncClient(base_url=url) as other:
                    assert (await asyncio.wait_for(other.get("/healthz"), timeout=1.0)).status_code == 200
            finally:
                writer.transport.abort()  # else the server's shutdown waits for that body
        assert (await store.statistics()).total_spans == 0


@pytest.mark.parametrize("path", ["/v1/spans", "/v1/rewards", "/proxy/admin/pause"])
async def test_a_refused_write_never_calls_receive(tmp_path: Path, path: str) -> None:
    store = SqlStore(tmp_path / "store.db")
    app = build_app(store, tokens=TokenConfig.from_mapping({"admin": ADMIN}), sweep_interval=None)
    received: list[object] = []
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        received.append(1)
        return {"type": "http.request", "body": b"[]", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"), (b"content-length", b"2")]
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
        "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80),
    }  # fmt: skip
    await app(scope, receive, send)
    await store.close()
    assert sent[0]["status"] == 401 and b"missing bearer token" in sent[1]["body"]
    assert received == []


# ---- finding 5: an agent key's attempt has a quota --------------------------------------------------


async def _claim(url: str) -> tuple[AttemptedRollout, str]:
    """A running attempt and its agent key (minted by the runner token, as a runner does)."""
    async with StoreClient(url, token=ADMIN, max_retries=0) as admin:
        claim = await admin.start_rollout({"q": 1})
    async with StoreClient(url, token=RUNNER, max_retries=0) as runner:
        await runner.heartbeat(claim.rollout_id, claim.attempt_id)
        return claim, await runner.mint_agent_key(claim.rollout_id, claim.attempt_id)


def _spans(claim: AttemptedRollout, count: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "rollout_id": claim.rollout_id,
            "attempt_id": claim.attempt_id,
            "trace_id": "ab" * 16,
            "span_id": f"{start + i:016x}",
            "name": "step",
        }
        for i in range(count)
    ]


def _otlp(claim: AttemptedRollout, count: int) -> bytes:
    binding = {semconv.ROLLOUT_ID: claim.rollout_id, semconv.ATTEMPT_ID: claim.attempt_id}
    attributes = [{"key": k, "value": {"stringValue": v}} for k, v in binding.items()]
    spans = [
        {
            "traceId": "cd" * 16,
            "spanId": f"{0xF000 + i:016x}",
            "name": "otlp",
            "kind": 1,
            "attributes": attributes,
        }
        for i in range(count)
    ]
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})


def _bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def test_one_huge_request_of_an_agent_key_is_refused_whole(tmp_path: Path) -> None:
    async with with_tokens(tmp_path) as (url, store):
        claim, key = await _claim(url)
        async with httpx.AsyncClient(base_url=url, timeout=60.0) as http:
            answer = await http.post("/v1/spans", json=_spans(claim, 50_000), headers=_bearer(key))
        assert answer.status_code == 429, answer.text[:300]
        assert answer.json()["code"] == "quota_exceeded"
        assert "at most 5000 spans per request" in answer.json()["message"]
        assert await store.query_spans(claim.rollout_id) == []


async def test_the_client_gives_up_on_a_quota_at_once(tmp_path: Path) -> None:
    """A quota's 429 is final: the client raises it as QuotaExceededError without trying again (a
    rate limit's 429 it retries)."""
    async with with_tokens(tmp_path) as (url, store):
        claim, key = await _claim(url)
        async with StoreClient(url, token=key, max_retries=5) as agent:
            with pytest.raises(QuotaExceededError, match="at most 5000 spans per request"):
                await agent.add_many_spans([SpanIn.model_validate(s) for s in _spans(claim, 5001)])
            assert agent.retries == 0
        assert await store.query_spans(claim.rollout_id) == []


async def test_an_attempts_requests_spans_and_bytes_are_bounded(tmp_path: Path) -> None:
    quota = AttemptQuota(max_requests=6, max_spans=10, max_bytes=20_000)
    async with with_tokens(tmp_path, quota) as (url, store), httpx.AsyncClient(base_url=url) as http:
        claim, key = await _claim(url)
        assert (await http.post("/v1/spans", json=_spans(claim, 8), headers=_bearer(key))).status_code == 200
        over = await http.post("/v1/spans", json=_spans(claim, 3, start=100), headers=_bearer(key))
        assert over.status_code == 429 and "at most 10 spans per attempt" in over.json()["message"]
        otlp = {**_bearer(key), "content-type": "application/json"}
        over = await http.post("/v1/traces", content=_otlp(claim, 3), headers=otlp)
        assert over.status_code == 429 and "spans per attempt" in over.json()["message"]
        events = semconv.AGL_EVENTS_PATH.format(rollout_id=claim.rollout_id, attempt_id=claim.attempt_id)
        for _ in range(2):
            note = await http.post(events, json={"event_type": "note", "data": {}}, headers=_bearer(key))
            assert note.status_code == 200, note.text
        over = await http.post(events, json={"event_type": "note", "data": {}}, headers=_bearer(key))
        assert over.status_code == 429 and "spans per attempt" in over.json()["message"]
        assert len(await store.query_spans(claim.rollout_id)) == 10
        # Six requests were counted (three of them refused for spans): the seventh is over.
        over = await http.post(
            "/v1/rewards", json={"rollout_id": claim.rollout_id, "value": 1.0}, headers=_bearer(key)
        )
        assert over.status_code == 429 and "at most 6 requests per attempt" in over.json()["message"]
        assert over.json()["details"] == {
            "quota": "requests per attempt",
            "limit": 6,
            "used": 6,
            "unit": "requests",
        }
        assert await store.query_rewards(claim.rollout_id) == []
        # A runner's role token is the operator's own: not counted.
        for i in range(10):
            spans = _spans(claim, 2, start=200 + 2 * i)
            assert (await http.post("/v1/spans", json=spans, headers=_bearer(RUNNER))).status_code == 200
        # Another attempt has its own quota; its bytes are counted from Content-Length before the body is read.
        other, other_key = await _claim(url)
        big = [{**_spans(other, 1)[0], "attributes": {"pad": "x" * 25_000}}]
        over = await http.post("/v1/spans", json=big, headers=_bearer(other_key))
        assert over.status_code == 429 and "at most 20000 bytes per attempt" in over.json()["message"]

        async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
            yield orjson.dumps(big)

        over = await http.post("/v1/spans", content=chunked(), headers={**otlp, **_bearer(other_key)})
        assert over.status_code == 429 and "bytes per attempt" in over.json()["message"], over.text
        over = await http.post("/v1/traces", content=chunked(), headers={**otlp, **_bearer(other_key)})
        assert over.status_code == 429 and over.json()["code"] == "quota_exceeded", over.text
        assert await store.query_spans(other.rollout_id) == []


async def test_store_serve_takes_the_quota_from_its_flags(tmp_path: Path) -> None:
    env = {
        "LIGHTNINGRL_ADMIN_TOKEN": ADMIN,
        "LIGHTNINGRL_RUNNER_TOKEN": RUNNER,
        "LIGHTNINGRL_AGENT_SECRET": SECRET,
    }
    flags = ("--attempt-max-requests", "2", "--request-max-spans", "3")
    server = LiveServer(tmp_path / "store.db", tmp_path / "server.log", extra_args=flags, env=env).start()
    try:
        claim, key = await _claim(server.url)
        async with httpx.AsyncClient(base_url=server.url) as http:
            over = await http.post("/v1/spans", json=_spans(claim, 4), headers=_bearer(key))
            assert over.status_code == 429 and "at most 3 spans per request" in over.json()["message"]
            assert (
                await http.post("/v1/spans", json=_spans(claim, 3), headers=_bearer(key))
            ).status_code == 200
            over = await http.post("/v1/spans", json=_spans(claim, 1, start=9), headers=_bearer(key))
            assert over.status_code == 429 and "at most 2 requests per attempt" in over.json()["message"]
    finally:
        server.stop()
