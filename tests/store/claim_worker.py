"""A worker process for the concurrency and crash tests: claims rollouts and prints what it did."""

from __future__ import annotations

import asyncio
import sys

from lightningstore import SpanIn, SqlStore


async def claim_all(url: str, worker_id: str) -> None:
    store = SqlStore(url)
    try:
        while (claimed := await store.dequeue_rollout(worker_id)) is not None:
            await store.update_attempt(claimed.rollout_id, claimed.attempt_id, status="succeeded")
            print(claimed.rollout_id, flush=True)
    finally:
        await store.close()


async def claim_and_hang(url: str, worker_id: str) -> None:
    """Claim one rollout, write a span, print the ids, then hang (the test SIGKILLs us)."""
    store = SqlStore(url)
    claimed = await store.dequeue_rollout(worker_id)
    assert claimed is not None
    await store.add_span(
        SpanIn(
            rollout_id=claimed.rollout_id,
            attempt_id=claimed.attempt_id,
            trace_id="t",
            span_id="before-crash",
            name="step",
        )
    )
    print(claimed.rollout_id, claimed.attempt_id, flush=True)
    await asyncio.sleep(600)


if __name__ == "__main__":
    mode, url, worker = sys.argv[1:4]
    asyncio.run((claim_all if mode == "all" else claim_and_hang)(url, worker))
