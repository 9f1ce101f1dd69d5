"""AttemptQuota: how much one agent key may send to the store server, counted per attempt.

An agent key speaks for one attempt (`auth.agent_key`) and is held by the agent, the least trusted
process of a run: unbounded, one greedy or broken agent could fill the database through it. The
`QuotaLedger` counts, per attempt, the write requests its key makes (model calls through the gateway
included), the bytes of their bodies, and the spans it stores (POST /v1/spans, OTLP /v1/traces, the
events route), and caps the spans of one request. Past a limit the request is answered 429 naming
the quota and its limit, and nothing of it is stored. Role tokens are the operator's own: not counted.

The counters live in this server process's memory: a server of N processes (`--workers N`) allows N
times the limits, and a restart starts them from zero. Only the `max_attempts` most recently active
attempts are kept (least recently used dropped first); an attempt's key stops working when it ends,
so the counters of ended attempts only wait to be dropped.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, cast

from starlette.responses import Response
from starlette.types import Message, Receive

from lightningstore.auth.tokens import Caller
from lightningstore.data.span import Span, SpanIn
from lightningstore.errors import QuotaExceededError
from lightningstore.server.body_limit import BodyRefused
from lightningstore.server.error_handlers import error_response
from lightningstore.store import LightningStore

CODE = QuotaExceededError.code


@dataclass(frozen=True)
class AttemptQuota:
    """The limits of one attempt's agent key (each a positive integer). The defaults leave the examples'
    agents (tens of spans and model calls per attempt, at most a few MB) two orders of magnitude."""

    max_spans: int = 20_000
    max_bytes: int = 64 * 1024 * 1024
    """Request body bytes, as sent (compressed OTLP counts compressed)."""
    max_requests: int = 10_000
    """Write requests (POST, PUT, PATCH, DELETE), model calls through the gateway included."""
    max_spans_per_request: int = 5_000
    max_attempts: int = 100_000
    """How many attempts' counters are kept (least recently active dropped first)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"attempt quota {f.name} must be a positive integer, got {value!r}")

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


DEFAULT_ATTEMPT_QUOTA = AttemptQuota()


class BodyOverQuota(BodyRefused):
    """Raised inside `receive` when a streamed body passes the attempt's byte quota (answered as a body
    too large is, by BodyLimitMiddleware or FastAPI's body reader)."""

    code = CODE

    def __init__(self, reason: str) -> None:
        super().__init__(429, reason)


@dataclass(slots=True)
class Usage:
    """What one attempt's key has sent so far."""

    requests: int = 0
    bytes: int = 0
    spans: int = 0


def _whose(caller: Caller) -> str:
    return f"the agent key of rollout {caller.rollout_id!r} attempt {caller.attempt_id!r}"


class QuotaLedger:
    """The counters of every attempt an agent key wrote for, in least-recently-used order."""

    def __init__(self, quota: AttemptQuota) -> None:
        self.quota = quota
        self._usage: OrderedDict[tuple[str | None, str | None], Usage] = OrderedDict()

    def __len__(self) -> int:
        return len(self._usage)

    def usage(self, caller: Caller) -> Usage:
        key = (caller.rollout_id, caller.attempt_id)
        usage = self._usage.get(key)
        if usage is None:
            usage = self._usage[key] = Usage()
            if len(self._usage) > self.quota.max_attempts:
                self._usage.popitem(last=False)
        else:
            self._usage.move_to_end(key)
        return usage

    def admit(self, caller: Caller, declared_bytes: int | None) -> Response | None:
        """Count one write request of `caller` (an agent key) and its declared body size: 429 naming the
        quota once either is spent (the refused request is not counted)."""
        usage = self.usage(caller)
        quota = self.quota
        if usage.requests >= quota.max_requests:
            return self._refusal(caller, "requests per attempt", quota.max_requests, usage.requests)
        if declared_bytes is not None:
            if usage.bytes + declared_bytes > quota.max_bytes:
                return self._refusal(
                    caller, "bytes per attempt", quota.max_bytes, usage.bytes, declared_bytes
                )
            usage.bytes += declared_bytes
        usage.requests += 1
        return None

    def metered(self, caller: Caller, receive: Receive) -> Receive:
        """`receive` counting a body of undeclared length (chunked) against the byte quota as it arrives."""
        usage = self.usage(caller)
        limit = self.quota.max_bytes

        async def counting() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                usage.bytes += len(message.get("body", b""))
                if usage.bytes > limit:
                    raise BodyOverQuota(
                        f"quota exceeded for {_whose(caller)}: at most {limit} bytes per attempt"
                    )
            return message

        return counting

    def charge_spans(self, caller: Caller, count: int) -> None:
        """Count `count` spans about to be stored; QuotaExceededError (nothing counted) past either span quota."""
        quota = self.quota
        if count > quota.max_spans_per_request:
            raise QuotaExceededError(
                f"quota exceeded for {_whose(caller)}: at most {quota.max_spans_per_request} spans per "
                f"request, got {count}",
                "spans per request",
            )
        usage = self.usage(caller)
        if usage.spans + count > quota.max_spans:
            raise QuotaExceededError(
                f"quota exceeded for {_whose(caller)}: at most {quota.max_spans} spans per attempt "
                f"({usage.spans} stored, {count} more sent)",
                "spans per attempt",
            )
        usage.spans += count

    def refund_spans(self, caller: Caller, count: int) -> None:
        """Give back spans counted for a write that stored nothing."""
        usage = self.usage(caller)
        usage.spans = max(0, usage.spans - count)

    def store_for(self, store: LightningStore, caller: Caller) -> LightningStore:
        """`store` as one request of `caller` (an agent key) sees it: its span writes are counted."""
        return cast(LightningStore, MeteredStore(store, self, caller))

    def _refusal(
        self, caller: Caller, quota: str, limit: int, used: int, more: int | None = None
    ) -> Response:
        unit = quota.split()[0]
        sent = f"; {used} sent" + (f", {more} more declared" if more is not None else "")
        return error_response(
            429,
            CODE,
            f"quota exceeded for {_whose(caller)}: at most {limit} {quota}{sent}",
            {"quota": quota, "limit": limit, "used": used, "unit": unit},
        )


class MeteredStore:
    """The store seen by one agent-key request: `add_span` and `add_many_spans` charge the attempt's
    span quota before writing (and refund it when the write stores nothing); the rest is the store."""

    def __init__(self, store: LightningStore, ledger: QuotaLedger, caller: Caller) -> None:
        self._store = store
        self._ledger = ledger
        self._caller = caller

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def add_many_spans(self, spans: Sequence[SpanIn]) -> list[Span]:
        count = len(spans)
        self._ledger.charge_spans(self._caller, count)
        try:
            return await self._store.add_many_spans(spans)
        except BaseException:
            self._ledger.refund_spans(self._caller, count)  # one transaction: none of them was stored
            raise

    async def add_span(self, span: SpanIn) -> Span:
        (stored,) = await self.add_many_spans([span])
        return stored
