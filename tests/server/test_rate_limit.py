"""Per-caller rate limits: token buckets, 429 with a reason and Retry-After, nothing lost on refusal.

Most tests freeze the limiter's clock so that every outcome is certain; the real-clock test only
asserts what elapsed time guarantees.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable

import httpx
import pytest
from fastapi import FastAPI

from lightningstore import SqlStore, StoreError
from lightningstore.auth import TokenConfig, agent_key
from lightningstore.client.store_client import StoreClient
from lightningstore.server import build_app
from lightningstore.server import run as server_run
from lightningstore.server.rate_limit import RateLimiter

QUERY = "/v1/rollouts/query"


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_app(sql_store: SqlStore, clock: FakeClock, tokens: dict[str, object]) -> Callable[..., FastAPI]:
    """Apps over `sql_store` limited to `rate`/s with bursts of `burst`, on the frozen `clock`."""

    def make(rate: float, burst: int | None = None, *, secured: bool = False) -> FastAPI:
        token_config = TokenConfig.from_mapping(tokens) if secured else None
        app = build_app(
            sql_store, tokens=token_config, sweep_interval=None, rate_limit=rate, rate_burst=burst
        )
        app.state.rate_limiter.clock = clock
        return app

    return make


def http(app: FastAPI, token: str | None = None, client_ip: str = "127.0.0.1") -> httpx.AsyncClient:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    transport = httpx.ASGITransport(app=app, client=(client_ip, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers)


async def statuses(client: httpx.AsyncClient, count: int) -> list[int]:
    return [(await client.post(QUERY, json={})).status_code for _ in range(count)]


async def test_under_the_limit_all_pass(make_app) -> None:
    client = http(make_app(rate=1.0, burst=5))
    assert await statuses(client, 5) == [200] * 5


async def test_burst_beyond_the_limit_is_429_with_reason_and_retry_after(make_app) -> None:
    client = http(make_app(rate=0.5, burst=3))
    assert await statuses(client, 3) == [200] * 3
    refused = await client.post(QUERY, json={})
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "2"  # one token at 0.5/s
    body = refused.json()
    assert body["code"] == "rate_limited"
    assert body["message"] == (
        "rate limit exceeded for client 127.0.0.1: at most 0.5 requests/second (bursts of 3); retry after 2 s"
    )
    assert body["details"] == {"retry_after": 2, "rate": 0.5, "burst": 3}


async def test_retry_after_is_a_whole_second_at_least(make_app) -> None:
    client = http(make_app(rate=1000.0, burst=1))
    assert await statuses(client, 2) == [200, 429]
    assert (await client.post(QUERY, json={})).headers["retry-after"] == "1"


async def test_concurrent_requests_share_one_bucket(make_app) -> None:
    client = http(make_app(rate=1.0, burst=5))
    responses = await asyncio.gather(*(client.post(QUERY, json={}) for _ in range(20)))
    codes = sorted(r.status_code for r in responses)
    assert codes == [200] * 5 + [429] * 15


async def test_callers_have_independent_buckets(make_app, tokens) -> None:
    app = make_app(rate=1.0, burst=2, secured=True)
    secret = str(tokens["agent_secret"])
    callers = [
        http(app, "adm-token"),
        http(app, "run-token"),
        http(app, "run-token-2"),  # another token of the same role
        http(app, agent_key(secret, "ro-1", "at-1")),
        http(app, agent_key(secret, "ro-1", "at-2")),  # another attempt's key
    ]
    for caller in callers:
        codes = await statuses(caller, 3)
        assert 429 not in codes[:2] and codes[2] == 429

    # Unknown tokens are counted by client address: 401 until that address's bucket is empty.
    assert await statuses(http(app, "guess-1", client_ip="10.0.0.9"), 2) == [401, 401]
    assert await statuses(http(app, "guess-2", client_ip="10.0.0.9"), 1) == [429]


async def test_dev_mode_limits_by_client_address(make_app) -> None:
    app = make_app(rate=1.0, burst=1)
    assert await statuses(http(app, client_ip="10.0.0.1"), 2) == [200, 429]
    assert await statuses(http(app, client_ip="10.0.0.2"), 2) == [200, 429]
    # Any token is ignored in dev mode: it does not buy a fresh bucket.
    assert await statuses(http(app, "whatever", client_ip="10.0.0.1"), 1) == [429]


async def test_tokens_refill_after_waiting(make_app, clock) -> None:
    client = http(make_app(rate=4.0, burst=3))
    assert await statuses(client, 4) == [200, 200, 200, 429]
    clock.advance(0.5)  # two tokens at 4/s
    assert await statuses(client, 3) == [200, 200, 429]
    clock.advance(60.0)  # refills up to the burst, no further
    assert await statuses(client, 4) == [200, 200, 200, 429]


async def test_real_clock_refills(sql_store) -> None:
    app = build_app(sql_store, sweep_interval=None, rate_limit=5.0, rate_burst=1)
    client = http(app)
    started = time.monotonic()
    assert (await client.post(QUERY, json={})).status_code == 200
    second = await client.post(QUERY, json={})
    if time.monotonic() - started < 0.2:  # no token can have come back yet
        assert second.status_code == 429
    await asyncio.sleep(0.25)  # at 5/s a whole token is back whatever happened before
    assert (await client.post(QUERY, json={})).status_code == 200


async def test_healthz_is_never_limited(make_app) -> None:
    client = http(make_app(rate=1.0, burst=1))
    for _ in range(10):
        assert (await client.get("/healthz")).status_code == 200
    assert await statuses(client, 2) == [200, 429]  # health checks took no token
    assert (await client.get("/healthz")).status_code == 200


async def test_refused_write_changes_nothing(make_app, sql_store) -> None:
    app = make_app(rate=1.0, burst=1)
    client = http(app)
    assert (await client.post(QUERY, json={})).status_code == 200
    refused = await client.post("/v1/rollouts", json=[{"input": "lost?", "rollout_id": "ro-refused"}])
    assert refused.status_code == 429
    assert await sql_store.query_rollouts() == []

    store_client = StoreClient("http://127.0.0.1", transport=httpx.ASGITransport(app=app), max_retries=0)
    with pytest.raises(StoreError, match="rate limit exceeded") as caught:
        await store_client.enqueue_rollout("lost?")
    assert caught.value.status_code == 429  # type: ignore[attr-defined]
    assert await sql_store.query_rollouts() == []


async def test_store_client_waits_retry_after_then_succeeds(
    make_app, clock, sql_store, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(rate=0.5, burst=1)
    store_client = StoreClient("http://127.0.0.1", transport=httpx.ASGITransport(app=app), max_retries=3)
    assert await store_client.query_rollouts() == []  # takes the only token
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds)
        await real_sleep(0)

    monkeypatch.setattr("lightningstore.client.store_client.asyncio.sleep", fake_sleep)
    rollout = await store_client.enqueue_rollout("once")  # not idempotent: still safe, 429 never ran it
    assert store_client.retries == 1 and slept[0] >= 2.0  # Retry-After: 2
    assert [r.rollout_id for r in await sql_store.query_rollouts()] == [rollout.rollout_id]


def test_limiter_bounds_its_memory(clock) -> None:
    limiter = RateLimiter(10.0, 2, max_keys=100, clock=clock)
    for n in range(1000):
        assert limiter.acquire(("client", str(n))) == 0.0
    assert len(limiter) == 100
    assert limiter.acquire(("client", "999")) == 0.0 and limiter.acquire(("client", "999")) > 0.0
    clock.advance(limiter.idle_seconds)  # every bucket is full again: forgetting them loses nothing
    assert limiter.acquire(("client", "0")) == 0.0
    assert len(limiter) == 1


@pytest.mark.parametrize("rate", [0, -1.0, float("nan"), float("inf")])
def test_bad_rates_are_refused(rate: float) -> None:
    with pytest.raises(ValueError, match="rate limit must be a positive number"):
        RateLimiter(rate)


def test_bad_configuration_is_refused(sql_store) -> None:
    with pytest.raises(ValueError, match="rate burst must be an integer of at least 1, got 0"):
        RateLimiter(1.0, 0)
    with pytest.raises(ValueError, match="needs a rate_limit"):
        build_app(sql_store, rate_burst=5)
    assert RateLimiter(2.5).burst == 3  # one second's worth by default
    assert build_app(sql_store).state.rate_limiter is None  # off unless asked for


def test_serve_options(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    server_run.add_serve_arguments(parser)
    served: list[dict[str, object]] = []
    monkeypatch.setattr(server_run, "serve", lambda db, **kwargs: served.append(kwargs))

    assert server_run.serve_from_args(parser.parse_args(["--rate-limit", "50", "--rate-burst", "200"])) == 0
    assert server_run.serve_from_args(parser.parse_args([])) == 0
    assert [(s["rate_limit"], s["rate_burst"]) for s in served] == [(50.0, 200), (None, None)]

    assert server_run.serve_from_args(parser.parse_args(["--rate-burst", "5"])) == 2
    assert "--rate-burst needs --rate-limit" in capsys.readouterr().err
    for bad in (["--rate-limit", "-1"], ["--rate-burst", "0"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)
