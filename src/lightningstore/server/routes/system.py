"""Health, workers, statistics and the watchdog sweep."""

from __future__ import annotations

from fastapi import Request

from lightningstore.auth.tokens import Permission
from lightningstore.data.attempt import Attempt
from lightningstore.data.statistics import StoreStatistics
from lightningstore.data.worker import Worker
from lightningstore.http_api import Health, SweepBody, WorkerBody
from lightningstore.server.auth import context


async def healthz() -> Health:
    """Liveness; needs no token."""
    return Health()


async def update_worker(request: Request, worker_id: str, body: WorkerBody) -> Worker:
    """Create or update a worker and record its heartbeat; absent fields stay as they are."""
    store, caller = context(request)
    caller.require(Permission.CLAIM)
    return await store.update_worker(worker_id, **{k: getattr(body, k) for k in body.model_fields_set})


async def query_workers(request: Request) -> list[Worker]:
    """All workers known to the store."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return await store.query_workers()


async def statistics(request: Request) -> StoreStatistics:
    """Counts of everything stored."""
    store, caller = context(request)
    caller.require(Permission.READ)
    return await store.statistics()


async def sweep_stale_attempts(request: Request, body: SweepBody) -> list[Attempt]:
    """Run the watchdog now (the server also runs it periodically)."""
    store, caller = context(request)
    caller.require(Permission.ADMIN)
    return await store.sweep_stale_attempts(body.now)
