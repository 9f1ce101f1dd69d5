"""Rollout routes: enqueue, claim, start, update, cancel, wait, query."""

from __future__ import annotations

from fastapi import Body, Request

from lightningstore.auth.tokens import Caller, Permission
from lightningstore.data.attempt import AttemptedRollout
from lightningstore.data.rollout import Rollout, RolloutRequest
from lightningstore.errors import found
from lightningstore.http_api import (
    DequeueBody,
    QueryRolloutsBody,
    StartRolloutBody,
    UpdateRolloutBody,
    WaitBody,
)
from lightningstore.server.auth import context
from lightningstore.store import LightningStore

MAX_WAIT_SECONDS = 30.0
MAX_REQUESTS = 100_000
"""The most rollouts one POST /v1/rollouts enqueues."""


async def enqueue_rollouts(
    request: Request, requests: list[RolloutRequest] = Body(max_length=MAX_REQUESTS)
) -> list[Rollout]:
    """Queue rollouts in order, all or none; idempotent per given `rollout_id`."""
    store, caller = context(request)
    return await enqueue_as(store, caller, requests)


async def enqueue_as(store: LightningStore, caller: Caller, requests: list[RolloutRequest]) -> list[Rollout]:
    """POST /v1/rollouts once its body is read (shared with the server's fast path)."""
    caller.require(Permission.ENQUEUE)
    return await store.enqueue_many_rollouts(requests)


async def dequeue_rollouts(request: Request, body: DequeueBody) -> list[AttemptedRollout]:
    """Claim up to `limit` waiting rollouts, oldest first."""
    store, caller = context(request)
    return await dequeue_as(store, caller, body)


async def dequeue_as(store: LightningStore, caller: Caller, body: DequeueBody) -> list[AttemptedRollout]:
    """POST /v1/rollouts/dequeue once its body is read (shared with the server's fast path)."""
    caller.require(Permission.CLAIM)
    return await store.dequeue_many_rollouts(body.limit, worker_id=body.worker_id, wait=body.wait)


async def start_rollout(request: Request, body: StartRolloutBody) -> AttemptedRollout:
    """Create a rollout and claim it at once."""
    store, caller = context(request)
    caller.require(Permission.CLAIM)
    return await store.start_rollout(**dict(body))


async def query_rollouts(request: Request, body: QueryRolloutsBody) -> list[Rollout]:
    """Rollouts matching every given filter, sorted and paginated."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return await store.query_rollouts(**dict(body))


async def wait_for_rollouts(request: Request, body: WaitBody) -> list[Rollout]:
    """The terminal ones of the given rollouts, waiting up to `timeout` (at most 30 s per call)."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    timeout = MAX_WAIT_SECONDS if body.timeout is None else min(body.timeout, MAX_WAIT_SECONDS)
    return await store.wait_for_rollouts(body.rollout_ids, timeout=timeout)


async def get_rollout(request: Request, rollout_id: str) -> Rollout:
    """One rollout (404 if unknown)."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return found(await store.get_rollout_by_id(rollout_id), "rollout", rollout_id)


async def update_rollout(request: Request, rollout_id: str, body: UpdateRolloutBody) -> Rollout:
    """Change the fields present in the body; status moves follow the state machine."""
    store, caller = context(request)
    caller.require(Permission.MANAGE_ROLLOUTS)
    return await store.update_rollout(rollout_id, **{k: getattr(body, k) for k in body.model_fields_set})


async def cancel_rollout(request: Request, rollout_id: str) -> Rollout:
    """Cancel a rollout that has not finished (cancelling twice is harmless)."""
    store, caller = context(request)
    caller.require(Permission.MANAGE_ROLLOUTS)
    return await store.cancel_rollout(rollout_id)
