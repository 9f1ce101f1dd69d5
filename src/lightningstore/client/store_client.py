"""StoreClient: the LightningStore over HTTP (httpx), with bounded retries and idempotent writes."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, Literal

import httpx
import orjson
from pydantic import BaseModel, TypeAdapter

from lightningstore.batch_read import checked_attempt, checked_attributes, distinct_ids
from lightningstore.client.http_errors import (
    StoreUnavailableError,
    error_from_response,
    is_quota_refusal,
    retry_after,
)
from lightningstore.client.pool import ClientPool
from lightningstore.client.wire import WirePool
from lightningstore.data.attempt import Attempt, AttemptedRollout
from lightningstore.data.attempt_end import ending_status, owned_rewards
from lightningstore.data.resource import PointerMove, ResourceSet, ResourceVersion
from lightningstore.data.reward import Reward, RewardIn
from lightningstore.data.rollout import Rollout, RolloutRequest
from lightningstore.data.span import Span, SpanIn
from lightningstore.data.statistics import StoreStatistics
from lightningstore.data.store_request import (
    AttemptFinish,
    AttemptUpdate,
    PointerMoveRequest,
    ResourcesRequest,
    RolloutQuery,
    RolloutUpdate,
    SpanQuery,
    SpansManyQuery,
    VersionRequest,
    WorkerUpdate,
)
from lightningstore.data.worker import Worker
from lightningstore.errors import (
    InvalidInputError,
    NotFoundError,
    StoreError,
)
from lightningstore.http_api import FinishAttemptBody, StorePaths, filled
from lightningstore.json_writer import write_json
from lightningstore.store import LightningStore, check_claim_wait

MAX_WAIT_PER_CALL = 30.0
"""The server answers a wait after at most this many seconds; the client waits again until its timeout."""

_rollouts = TypeAdapter(list[Rollout])
_maybe_rollout = TypeAdapter(Rollout | None)
_claims = TypeAdapter(list[AttemptedRollout])
_attempts = TypeAdapter(list[Attempt])
_maybe_attempt = TypeAdapter(Attempt | None)
_spans = TypeAdapter(list[Span])
_span_ins = TypeAdapter(list[SpanIn])
_requests = TypeAdapter(list[RolloutRequest])
_rewards = TypeAdapter(list[Reward])
_spans_by_rollout = TypeAdapter(dict[str, list[Span]])
_rewards_by_rollout = TypeAdapter(dict[str, list[Reward]])
_versions = TypeAdapter(list[ResourceVersion])
_maybe_version = TypeAdapter(ResourceVersion | None)
_maybe_set = TypeAdapter(ResourceSet | None)
_moves = TypeAdapter(list[PointerMove])
_workers = TypeAdapter(list[Worker])


def _new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def _dump(value: Any) -> Any:
    # Python mode: a NaN stays a NaN for write_json to refuse (JSON mode would make it null).
    return value.model_dump() if isinstance(value, BaseModel) else value


class StoreClient(LightningStore):
    """A LightningStore served by `lightningrl store serve`.

    Every call retries connection errors, 502/503/504 and 429 (rate limited: refused before it reached
    the store) with exponential backoff, waiting at least the response's `Retry-After`, bounded by
    `max_retries` and `retry_seconds`. Calls that are safe to repeat (reads, span and reward writes,
    enqueues, status updates) also retry 500s and lost responses; the client makes them safe by
    generating `rollout_id`, `reward_id` and `version_id` when the caller gives none. Claims
    (`dequeue_*`, `start_*`), `add_resources`, `add_resource_set` and `move_pointer` are retried only
    when the request provably never reached the server.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 30,
        retry_seconds: float = 60.0,
        max_connections: int = 256,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.retry_seconds = retry_seconds
        self.retries = 0
        """How many requests this client has re-sent (observability; tests use it)."""
        self.auth_headers: dict[str, str] = {"authorization": f"Bearer {token}"} if token else {}
        """The credentials header this client sends (empty in dev mode), e.g. for an OTLP exporter."""
        # Our own lean HTTP/1.1 connections, unless a transport is given (an ASGI app in tests).
        self._pool: WirePool | ClientPool = (
            WirePool(self.base_url, self.auth_headers, timeout=timeout, max_connections=max_connections)
            if transport is None
            else ClientPool(
                self.base_url,
                self.auth_headers,
                timeout=timeout,
                max_connections=max_connections,
                transport=transport,
            )
        )

    async def __aenter__(self) -> StoreClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._pool.aclose()

    # ---- transport ---------------------------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        idempotent: bool = True,
        timeout: float | None = None,
    ) -> bytes:
        """Send one request with retries; return the response body or raise the typed error."""
        content = body if body is None or isinstance(body, bytes) else write_json(body)
        headers = {"content-type": "application/json"} if content is not None else None
        query = {k: v for k, v in (params or {}).items() if v is not None}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_seconds
        delay = 0.05
        for attempt in range(self.max_retries + 1):
            asked = 0.0
            try:
                response = await self._pool.request(
                    method, path, content=content, params=query, headers=headers, timeout=timeout
                )
            except httpx.TransportError as exc:
                never_sent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
                if not (idempotent or never_sent) or attempt == self.max_retries or loop.time() > deadline:
                    raise StoreUnavailableError(
                        f"{method} {self.base_url}{path} failed after {attempt + 1} tries: {exc!r}"
                    ) from exc
            else:
                status = response.status_code
                if status < 400:
                    return response.content
                # 429 and 503 are the store saying "not done, try again"; a 502/504 from something in
                # between may follow a stored write, so only an idempotent write is sent again.
                # A quota refusal is final: sending it again only spends the attempt's time.
                unavailable = (status == 503 or (status >= 500 and idempotent)) or (
                    status == 429 and not is_quota_refusal(response)
                )
                if not unavailable or attempt == self.max_retries or loop.time() > deadline:
                    raise error_from_response(response)
                asked = retry_after(response)
            self.retries += 1
            pause = max(delay * random.uniform(0.5, 1.0), asked)
            await asyncio.sleep(min(pause, max(0.0, deadline - loop.time())))
            delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")  # the loop returns or raises on its last try

    async def _get_or_none(self, path: str, adapter: TypeAdapter[Any]) -> Any:
        try:
            return adapter.validate_json(await self._call("GET", path))
        except NotFoundError:
            return None

    async def health(self) -> bool:
        """True when the server answers /healthz."""
        try:
            await self._call("GET", StorePaths.HEALTHZ, idempotent=True)
        except StoreError:
            return False
        return True

    async def mint_agent_key(self, rollout_id: str, attempt_id: str) -> str:
        """Ask the server for the agent key of one attempt (runner or admin token)."""
        path = filled(StorePaths.AGENT_KEY, rollout_id=rollout_id, attempt_id=attempt_id)
        return orjson.loads(await self._call("POST", path))["agent_key"]

    # ---- rollouts: enqueue and claim ---------------------------------------------------------

    async def enqueue_many_rollouts(self, requests: Sequence[RolloutRequest]) -> list[Rollout]:
        checked = [r if isinstance(r, RolloutRequest) else RolloutRequest.model_validate(r) for r in requests]
        if not checked:
            return []
        for request in checked:
            request.check_finite()
        # A client-made id turns a retried enqueue into a no-op instead of a duplicate.
        filled = [r if r.rollout_id else r.model_copy(update={"rollout_id": _new_id("ro")}) for r in checked]
        return _rollouts.validate_json(
            await self._call("POST", StorePaths.ROLLOUTS, _requests.dump_json(filled))
        )

    async def dequeue_many_rollouts(
        self, limit: int, *, worker_id: str | None = None, wait: float = 0
    ) -> list[AttemptedRollout]:
        check_claim_wait(wait)
        body: dict[str, Any] = {"limit": limit, "worker_id": worker_id}
        if wait:  # the server holds the request until it has claimed one, or `wait` has passed
            body["wait"] = wait
        data = await self._call(
            "POST", StorePaths.DEQUEUE, body, idempotent=False, timeout=wait + 30.0 if wait else None
        )
        return _claims.validate_json(data)

    async def _start_rollout(self, request: RolloutRequest, worker_id: str | None) -> AttemptedRollout:
        body = {**request.model_dump(exclude={"rollout_id"}), "worker_id": worker_id}
        data = await self._call("POST", StorePaths.START, body, idempotent=False)
        return AttemptedRollout.model_validate_json(data)

    async def start_attempt(self, rollout_id: str, *, worker_id: str | None = None) -> AttemptedRollout:
        path = filled(StorePaths.ATTEMPTS, rollout_id=rollout_id)
        data = await self._call("POST", path, {"worker_id": worker_id}, idempotent=False)
        return AttemptedRollout.model_validate_json(data)

    # ---- attempts and rollouts: progress -----------------------------------------------------

    async def heartbeat(self, rollout_id: str, attempt_id: str, *, worker_id: str | None = None) -> Attempt:
        path = filled(StorePaths.HEARTBEAT, rollout_id=rollout_id, attempt_id=attempt_id)
        return Attempt.model_validate_json(await self._call("POST", path, {"worker_id": worker_id}))

    async def _update_attempt(self, update: AttemptUpdate) -> Attempt:
        path = filled(StorePaths.ATTEMPT, rollout_id=update.rollout_id, attempt_id=update.attempt_id)
        return Attempt.model_validate_json(await self._call("PATCH", path, update.changes()))

    async def _finish_attempt(self, finish: AttemptFinish) -> Attempt:
        rollout_id, attempt_id = finish.rollout_id, finish.attempt_id
        body = FinishAttemptBody(
            status=ending_status(finish.status),
            failure_reason=finish.failure_reason,
            spans=[s if isinstance(s, SpanIn) else SpanIn.model_validate(s) for s in finish.spans],
            rewards=owned_rewards(
                finish.rewards, rollout_id, attempt_id
            ),  # ids fixed here: a retry stores them once
        )
        path = filled(StorePaths.FINISH, rollout_id=rollout_id, attempt_id=attempt_id)
        return Attempt.model_validate_json(await self._call("POST", path, body.model_dump_json().encode()))

    async def _update_rollout(self, update: RolloutUpdate) -> Rollout:
        body = {k: _dump(v) for k, v in update.changes().items()}
        return Rollout.model_validate_json(
            await self._call("PATCH", filled(StorePaths.ROLLOUT, rollout_id=update.rollout_id), body)
        )

    async def cancel_rollout(self, rollout_id: str) -> Rollout:
        return Rollout.model_validate_json(
            await self._call("POST", filled(StorePaths.CANCEL, rollout_id=rollout_id))
        )

    async def wait_for_rollouts(
        self, rollout_ids: Sequence[str], *, timeout: float | None = None
    ) -> list[Rollout]:
        ids = list(rollout_ids)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            if deadline is None:
                chunk = MAX_WAIT_PER_CALL
            else:
                # A negative timeout goes to the server as given, which refuses it.
                chunk = timeout if timeout < 0 else min(MAX_WAIT_PER_CALL, max(0.0, deadline - loop.time()))
            body = {"rollout_ids": ids, "timeout": chunk}
            data = await self._call("POST", StorePaths.WAIT, body, timeout=max(chunk, 0) + 30.0)
            done = _rollouts.validate_json(data)
            if len(done) == len(ids) or (deadline is not None and loop.time() >= deadline):
                return done

    async def sweep_stale_attempts(self, now: float | None = None) -> list[Attempt]:
        return _attempts.validate_json(await self._call("POST", StorePaths.SWEEP, {"now": now}))

    # ---- spans and rewards -------------------------------------------------------------------

    async def add_many_spans(self, spans: Sequence[SpanIn]) -> list[Span]:
        checked = [s if isinstance(s, SpanIn) else SpanIn.model_validate(s) for s in spans]
        if not checked:
            return []
        return _spans.validate_json(await self._call("POST", StorePaths.SPANS, _span_ins.dump_json(checked)))

    async def add_reward(self, reward: RewardIn) -> Reward:
        reward = reward if isinstance(reward, RewardIn) else RewardIn.model_validate(reward)
        if reward.reward_id is None:
            reward = reward.model_copy(update={"reward_id": _new_id("rw")})
        return Reward.model_validate_json(
            await self._call("POST", StorePaths.REWARDS, reward.model_dump_json().encode())
        )

    # ---- queries -----------------------------------------------------------------------------

    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | None:
        return await self._get_or_none(filled(StorePaths.ROLLOUT, rollout_id=rollout_id), _maybe_rollout)

    async def _query_rollouts(self, query: RolloutQuery) -> list[Rollout]:
        status, rollout_ids = query.status, query.rollout_ids
        body = {
            **asdict(query),
            "status": [status] if isinstance(status, str) else (list(status) if status is not None else None),
            "rollout_ids": list(rollout_ids) if rollout_ids is not None else None,
        }
        return _rollouts.validate_json(await self._call("POST", StorePaths.QUERY_ROLLOUTS, body))

    async def query_attempts(self, rollout_id: str) -> list[Attempt]:
        return _attempts.validate_json(
            await self._call("GET", filled(StorePaths.ATTEMPTS, rollout_id=rollout_id))
        )

    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        return await self._get_or_none(
            filled(StorePaths.LATEST_ATTEMPT, rollout_id=rollout_id), _maybe_attempt
        )

    async def _query_spans(self, query: SpanQuery) -> list[Span]:
        params = asdict(query)
        path = filled(StorePaths.ROLLOUT_SPANS, rollout_id=params.pop("rollout_id"))
        return _spans.validate_json(await self._call("GET", path, params=params))

    async def query_rewards(self, rollout_id: str, *, name: str | None = None) -> list[Reward]:
        path = filled(StorePaths.ROLLOUT_REWARDS, rollout_id=rollout_id)
        return _rewards.validate_json(await self._call("GET", path, params={"name": name}))

    async def _query_spans_many(self, query: SpansManyQuery) -> dict[str, list[Span]]:
        # Checked here too, so that a bad call fails the same way without a round trip.
        ids = distinct_ids(query.rollout_ids)
        checked_attempt(query.attempt)
        keys = checked_attributes(query.attributes)
        body = {
            "rollout_ids": ids,
            "attempt": query.attempt,
            "attributes": list(keys) if keys is not None else None,
        }
        return _spans_by_rollout.validate_json(await self._call("POST", StorePaths.QUERY_SPANS, body))

    async def query_rewards_many(self, rollout_ids: Sequence[str]) -> dict[str, list[Reward]]:
        body = {"rollout_ids": distinct_ids(rollout_ids)}
        return _rewards_by_rollout.validate_json(await self._call("POST", StorePaths.QUERY_REWARDS, body))

    # ---- resources ---------------------------------------------------------------------------

    async def _add_resource_version(self, request: VersionRequest) -> ResourceVersion:
        body = {
            **asdict(request),
            "resource": _dump(request.resource),
            "version_id": request.version_id or _new_id("rv"),
        }
        return ResourceVersion.model_validate_json(
            await self._call("POST", StorePaths.RESOURCE_VERSIONS, body)
        )

    async def _add_resources(self, request: ResourcesRequest) -> ResourceSet:
        body = {
            "resources": {name: _dump(r) for name, r in request.resources.items()},
            "created_by": request.created_by,
            "parents": request.parents,
        }
        data = await self._call("POST", StorePaths.RESOURCES, body, idempotent=False)
        return ResourceSet.model_validate_json(data)

    async def add_resource_set(self, versions: dict[str, str]) -> ResourceSet:
        data = await self._call("POST", StorePaths.RESOURCE_SETS, {"versions": versions}, idempotent=False)
        return ResourceSet.model_validate_json(data)

    async def get_resources_by_id(self, resources_id: str) -> ResourceSet | None:
        return await self._get_or_none(filled(StorePaths.RESOURCE_SET, resources_id=resources_id), _maybe_set)

    async def get_latest_resources(self) -> ResourceSet | None:
        return _maybe_set.validate_json(await self._call("GET", StorePaths.LATEST_RESOURCE_SET))

    async def get_resource_version(self, version_id: str) -> ResourceVersion | None:
        return await self._get_or_none(
            filled(StorePaths.RESOURCE_VERSION, version_id=version_id), _maybe_version
        )

    async def get_pointer(self, name: str, pointer: Literal["latest", "approved"]) -> ResourceVersion | None:
        data = await self._call("GET", StorePaths.POINTERS, params={"name": name, "pointer": pointer})
        return _maybe_version.validate_json(data)

    async def list_resource_versions(self, name: str | None = None) -> list[ResourceVersion]:
        return _versions.validate_json(
            await self._call("GET", StorePaths.RESOURCE_VERSIONS, params={"name": name})
        )

    async def _move_pointer(self, move: PointerMoveRequest) -> PointerMove:
        return PointerMove.model_validate_json(
            await self._call("PUT", StorePaths.POINTERS, asdict(move), idempotent=False)
        )

    async def query_pointer_history(
        self, name: str, pointer: Literal["latest", "approved"] | None = None
    ) -> list[PointerMove]:
        data = await self._call("GET", StorePaths.POINTER_HISTORY, params={"name": name, "pointer": pointer})
        return _moves.validate_json(data)

    # ---- workers and statistics --------------------------------------------------------------

    async def _update_worker(self, update: WorkerUpdate) -> Worker:
        if not update.worker_id:
            raise InvalidInputError("worker_id", "must not be empty")
        return Worker.model_validate_json(
            await self._call("PUT", filled(StorePaths.WORKER, worker_id=update.worker_id), update.changes())
        )

    async def query_workers(self) -> list[Worker]:
        return _workers.validate_json(await self._call("GET", StorePaths.WORKERS))

    async def statistics(self) -> StoreStatistics:
        return StoreStatistics.model_validate_json(await self._call("GET", StorePaths.STATISTICS))
