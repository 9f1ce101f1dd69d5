"""Attempt routes: manual claim, heartbeat, update, finish, list, latest, and minting agent keys."""

from __future__ import annotations

from fastapi import Request

from lightningstore.auth.agent_key import agent_key
from lightningstore.auth.tokens import Caller, Permission
from lightningstore.data.attempt import Attempt, AttemptedRollout
from lightningstore.errors import ConflictError, NotFoundError
from lightningstore.http_api import AgentKey, FinishAttemptBody, UpdateAttemptBody, WorkerRef
from lightningstore.server.auth import context
from lightningstore.store import LightningStore


async def start_attempt(request: Request, rollout_id: str, body: WorkerRef) -> AttemptedRollout:
    """Open a new attempt of a waiting rollout (a manual claim)."""
    store, caller = context(request)
    caller.require(Permission.CLAIM)
    return await store.start_attempt(rollout_id, worker_id=body.worker_id)


async def query_attempts(request: Request, rollout_id: str) -> list[Attempt]:
    """All attempts of a rollout, oldest first."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return await store.query_attempts(rollout_id)


async def get_latest_attempt(request: Request, rollout_id: str) -> Attempt | None:
    """The rollout's most recent attempt, or null."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return await store.get_latest_attempt(rollout_id)


async def heartbeat(request: Request, rollout_id: str, attempt_id: str, body: WorkerRef) -> Attempt:
    """Record that the attempt is alive."""
    store, caller = context(request)
    caller.require(Permission.CLAIM)
    return await store.heartbeat(rollout_id, attempt_id, worker_id=body.worker_id)


async def update_attempt(
    request: Request, rollout_id: str, attempt_id: str, body: UpdateAttemptBody
) -> Attempt:
    """Change the fields present in the body; `attempt_id` may be `latest`."""
    store, caller = context(request)
    return await update_attempt_as(store, caller, body, rollout_id, attempt_id)


async def update_attempt_as(
    store: LightningStore, caller: Caller, body: UpdateAttemptBody, rollout_id: str, attempt_id: str
) -> Attempt:
    """PATCH .../attempts/{attempt_id} once its body is read (shared with the server's fast path)."""
    caller.require(Permission.CLAIM)
    fields = {k: getattr(body, k) for k in body.model_fields_set}
    return await store.update_attempt(rollout_id, attempt_id, **fields)


async def finish_attempt(
    request: Request, rollout_id: str, attempt_id: str, body: FinishAttemptBody
) -> Attempt:
    """Store the attempt's last spans and rewards and end it, in one transaction."""
    store, caller = context(request)
    caller.require(Permission.CLAIM)
    return await store.finish_attempt(
        rollout_id,
        attempt_id,
        status=body.status,
        failure_reason=body.failure_reason,
        spans=body.spans,
        rewards=body.rewards,
    )


async def mint_agent_key(request: Request, rollout_id: str, attempt_id: str) -> AgentKey:
    """The key that lets an agent write spans and rewards of this attempt only."""
    store, caller = context(request)
    caller.require(Permission.CLAIM)
    secret = request.app.state.tokens.agent_secret
    if not secret:
        raise ConflictError("the server has no agent secret configured (LIGHTNINGRL_AGENT_SECRET)")
    attempts = await store.query_attempts(rollout_id)
    if attempt_id not in {a.attempt_id for a in attempts}:
        raise NotFoundError("attempt", f"{attempt_id} of rollout {rollout_id}")
    return AgentKey(agent_key=agent_key(secret, rollout_id, attempt_id))
