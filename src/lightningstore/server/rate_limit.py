"""Per-caller rate limiting: a token bucket per credential (or client address), 429 with Retry-After."""

from __future__ import annotations

import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from lightningstore.auth.agent_key import verify_agent_key
from lightningstore.auth.tokens import TokenConfig
from lightningstore.server.error_handlers import error_response

UNLIMITED_PATHS = frozenset({"/healthz"})
DEFAULT_MAX_KEYS = 100_000

CallerKey = tuple[str, ...]


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """Token buckets by caller key: each holds up to `burst` tokens (default: one second's worth),
    refilled at `rate` per second; a request takes one.

    `acquire` never awaits, so requests on one event loop cannot interleave inside it. Memory stays
    bounded: a bucket untouched for `burst / rate` seconds is full again, the same as no bucket, so it
    is dropped; beyond `max_keys` live buckets the least recently used one goes too.
    """

    def __init__(
        self,
        rate: float,
        burst: int | None = None,
        *,
        max_keys: int = DEFAULT_MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not (isinstance(rate, int | float) and rate > 0 and math.isfinite(rate)):
            raise ValueError(f"rate limit must be a positive number of requests per second, got {rate!r}")
        if burst is None:
            burst = max(1, math.ceil(rate))
        if not (isinstance(burst, int) and burst >= 1):
            raise ValueError(f"rate burst must be an integer of at least 1, got {burst!r}")
        if max_keys < 1:
            raise ValueError(f"max_keys must be at least 1, got {max_keys!r}")
        self.rate = float(rate)
        self.burst = burst
        self.max_keys = max_keys
        self.clock = clock
        self.idle_seconds = burst / self.rate
        self._buckets: OrderedDict[CallerKey, _Bucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def acquire(self, key: CallerKey) -> float:
        """Take a token from `key`'s bucket: 0.0 when allowed, else the seconds until one is free."""
        now = self.clock()
        self._drop_idle(now)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(self.burst), now)
            if len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
        else:
            elapsed = max(0.0, now - bucket.stamp)
            bucket.tokens = min(float(self.burst), bucket.tokens + elapsed * self.rate)
            bucket.stamp = now
            self._buckets.move_to_end(key)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate

    def _drop_idle(self, now: float) -> None:
        # Buckets are kept in least-recently-used order, so the idle ones are at the front.
        while self._buckets:
            oldest = next(iter(self._buckets.values()))
            if now - oldest.stamp < self.idle_seconds:
                return
            self._buckets.popitem(last=False)


def _bearer_token(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return ""


def caller_key(tokens: TokenConfig, scope: Scope) -> tuple[CallerKey, str]:
    """The bucket key of a request and how to name that caller: the role token (role and a digest of
    the token), the agent key's attempt, or the client address when auth is off or the token unknown."""
    token = _bearer_token(scope) if tokens.enabled else ""
    if token:
        digest = hashlib.sha256(token.encode()).digest()
        role = tokens.roles_by_digest.get(digest)
        if role is not None:
            return (role.value, digest.hex()[:32]), f"{role.value} token"
        ids = verify_agent_key(tokens.agent_secret, token) if tokens.agent_secret else None
        if ids is not None:
            return ("agent", *ids), f"agent key of rollout {ids[0]!r} attempt {ids[1]!r}"
    host = scope["client"][0] if scope.get("client") else "unknown"
    return ("client", host), f"client {host}"


class RateLimitMiddleware:
    """Answers 429 with a reason and Retry-After when the caller's bucket is empty; /healthz is exempt.

    Runs before routing and before the body is read, so a refused request changes nothing.
    """

    def __init__(self, app: ASGIApp, limiter: RateLimiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNLIMITED_PATHS:
            await self.app(scope, receive, send)
            return
        tokens: TokenConfig = scope["app"].state.tokens
        key, who = caller_key(tokens, scope)
        wait = self.limiter.acquire(key)
        if wait <= 0.0:
            await self.app(scope, receive, send)
            return
        retry_after = max(1, math.ceil(wait))
        limiter = self.limiter
        reason = (
            f"rate limit exceeded for {who}: at most {limiter.rate:g} requests/second "
            f"(bursts of {limiter.burst}); retry after {retry_after} s"
        )
        response = error_response(
            429,
            "rate_limited",
            reason,
            {"retry_after": retry_after, "rate": limiter.rate, "burst": limiter.burst},
        )
        response.headers["retry-after"] = str(retry_after)
        await response(scope, receive, send)
