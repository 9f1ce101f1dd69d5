"""Rollout routes: enqueue, claim, start, update, cancel, wait, query."""

from __future__ import annotations

from fastapi import APIRouter, Body

from lightningstore.attempt import AttemptedRollout
from lightningstore.errors import NotFoundError
from lightningstore.rollout import Rollout, RolloutRequest
from lightningstore.server.auth import CallerDep
from lightningstore.server.deps import StoreDep
from lightningstore.server.schemas import (
    DequeueBody,
    QueryRolloutsBody,
    StartRolloutBody,
    UpdateRolloutBody,
    WaitBody,
)
from lightningstore.server.tokens import Permission

router = APIRouter(prefix="/v1/rollouts", tags=["rollouts"])
MAX_WAIT_SECONDS = 30.0


@router.post("")
async def enqueue_rollouts(
    store: StoreDep, caller: CallerDep, requests: list[RolloutRequest] = Body(max_length=100_000)
) -> list[Rollout]:
    """Queue rollouts in order, all or none; idempotent per given `rollout_id`."""
    caller.require(Permission.ENQUEUE)
    return await store.enqueue_many_rollouts(requests)


@router.post("/dequeue")
async def dequeue_rollouts(store: StoreDep, caller: CallerDep, body: DequeueBody) -> list[AttemptedRollout]:
    """Claim up to `limit` waiting rollouts, oldest first."""
    caller.require(Permission.CLAIM)
    return await store.dequeue_many_rollouts(body.limit, worker_id=body.worker_id)


@router.post("/start")
async def start_rollout(store: StoreDep, caller: CallerDep, body: StartRolloutBody) -> AttemptedRollout:
    """Create a rollout and claim it at once."""
    caller.require(Permission.CLAIM)
    return await store.start_rollout(
        body.input,
        mode=body.mode,
        resources_id=body.resources_id,
        config=body.config,
        metadata=body.metadata,
        group_id=body.group_id,
        worker_id=body.worker_id,
    )


@router.post("/query")
async def query_rollouts(store: StoreDep, caller: CallerDep, body: QueryRolloutsBody) -> list[Rollout]:
    """Rollouts matching every given filter, sorted and paginated."""
    caller.require(Permission.READ_RUNTIME)
    return await store.query_rollouts(
        status=body.status,
        mode=body.mode,
        rollout_ids=body.rollout_ids,
        group_id=body.group_id,
        sort_by=body.sort_by,
        descending=body.descending,
        limit=body.limit,
        offset=body.offset,
    )


@router.post("/wait")
async def wait_for_rollouts(store: StoreDep, caller: CallerDep, body: WaitBody) -> list[Rollout]:
    """The terminal ones of the given rollouts, waiting up to `timeout` (at most 30 s per call)."""
    caller.require(Permission.READ_RUNTIME)
    timeout = MAX_WAIT_SECONDS if body.timeout is None else min(body.timeout, MAX_WAIT_SECONDS)
    return await store.wait_for_rollouts(body.rollout_ids, timeout=timeout)


@router.get("/{rollout_id:id}")
async def get_rollout(store: StoreDep, caller: CallerDep, rollout_id: str) -> Rollout:
    """One rollout (404 if unknown)."""
    caller.require(Permission.READ_RUNTIME)
    rollout = await store.get_rollout_by_id(rollout_id)
    if rollout is None:
        raise NotFoundError("rollout", rollout_id)
    return rollout


@router.patch("/{rollout_id:id}")
async def update_rollout(
    store: StoreDep, caller: CallerDep, rollout_id: str, body: UpdateRolloutBody
) -> Rollout:
    """Change the fields present in the body; status moves follow the state machine."""
    caller.require(Permission.MANAGE_ROLLOUTS)
    return await store.update_rollout(rollout_id, **{k: getattr(body, k) for k in body.model_fields_set})


@router.post("/{rollout_id:id}/cancel")
async def cancel_rollout(store: StoreDep, caller: CallerDep, rollout_id: str) -> Rollout:
    """Cancel a rollout that has not finished (cancelling twice is harmless)."""
    caller.require(Permission.MANAGE_ROLLOUTS)
    return await store.cancel_rollout(rollout_id)
