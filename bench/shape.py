"""The headline store workload, shaped like Agent Lightning's own, over any store behind a small adapter.

It imports nothing from this project, so the anchor's side (bench/store_agl_side.py, run with Agent
Lightning's own interpreter) drives the very same code as ours (bench/store_vs_agl.py).

N rollouts are enqueued ONE BY ONE while R runner coroutines each claim a rollout, write S LLM-call
sized spans (~4 KB: ~2.7 KB of text plus 200 token ids) one `add_span` each or as one batch, and
finish the attempt; meanwhile the algorithm polls `wait_for_rollouts(timeout=0)` every 0.5 s for the
rollouts not yet done. Then one `query_spans` per rollout. The clock runs from the first enqueue to
the last query.
"""

from __future__ import annotations

import asyncio
import os
import random
import string
import time
from typing import Any, Protocol

TEXT_CHARS = 2700
PROMPT_IDS = 150
RESPONSE_IDS = 50
POLL_SECONDS = 0.5
IDLE_SECONDS = 0.05
"""A runner that found the queue empty before the last enqueue waits about this long (±50%) before asking
again (Agent Lightning's runner waits 5 s by default, which would time the sleep, not the store)."""


class Adapter(Protocol):
    """The seven calls of the workload, in either store's own API."""

    async def enqueue(self, i: int) -> str: ...
    async def claim(self, worker: str) -> tuple[str, str] | None: ...
    async def add_span(self, rollout_id: str, attempt_id: str, index: int, attrs: dict[str, Any]) -> None: ...
    async def add_spans(self, rollout_id: str, attempt_id: str, attrs: list[dict[str, Any]]) -> None: ...
    async def finish(self, rollout_id: str, attempt_id: str) -> None: ...
    async def finished(self, rollout_ids: list[str]) -> list[str]: ...
    async def count_spans(self, rollout_id: str) -> int: ...


def span_attributes(rng: random.Random) -> dict[str, Any]:
    """The attributes of one LLM-call span: the response text and 200 token ids."""
    return {
        "lightningrl.llm.response_text": "".join(rng.choices(string.ascii_letters + " ", k=TEXT_CHARS)),
        "lightningrl.llm.prompt_token_ids": [rng.randrange(50000) for _ in range(PROMPT_IDS)],
        "lightningrl.llm.response_token_ids": [rng.randrange(50000) for _ in range(RESPONSE_IDS)],
    }


async def drive(adapter: Adapter, n: int, r: int, s: int, *, batch: bool, seed: int = 0) -> dict[str, Any]:
    """Run the workload once; returns seconds, rollouts/s and every add_span latency (ms)."""
    rng = random.Random(seed)
    pool = [span_attributes(rng) for _ in range(64)]  # made before the clock starts
    ids: list[str] = []
    enqueued = asyncio.Event()
    done: set[str] = set()
    span_ms: list[float] = []
    polls = 0
    empty_claims = 0

    async def enqueue_all() -> None:
        for i in range(n):
            ids.append(await adapter.enqueue(i))
        enqueued.set()

    async def runner(k: int) -> int:
        nonlocal empty_claims
        finished = 0
        while True:
            claimed = await adapter.claim(f"runner-{k}")
            if claimed is None:
                empty_claims += 1
                if enqueued.is_set():
                    return finished
                await asyncio.sleep(IDLE_SECONDS * rng.uniform(0.5, 1.5))
                continue
            rollout_id, attempt_id = claimed
            attrs = [pool[(finished * s + j + k) % len(pool)] for j in range(s)]
            if batch:
                await adapter.add_spans(rollout_id, attempt_id, attrs)
            else:
                for j, a in enumerate(attrs):
                    t = time.perf_counter()
                    await adapter.add_span(rollout_id, attempt_id, j, a)
                    span_ms.append((time.perf_counter() - t) * 1000)
            await adapter.finish(rollout_id, attempt_id)
            finished += 1

    async def algorithm() -> None:
        nonlocal polls
        while not (enqueued.is_set() and len(done) == n):
            pending = [i for i in ids if i not in done]
            if pending:
                done.update(await adapter.finished(pending))
                polls += 1
            if not (enqueued.is_set() and len(done) == n):
                await asyncio.sleep(POLL_SECONDS)

    t0 = time.perf_counter()
    results = await asyncio.gather(enqueue_all(), algorithm(), *(runner(k) for k in range(r)))
    spans = 0
    for rollout_id in ids:
        spans += await adapter.count_spans(rollout_id)
    seconds = time.perf_counter() - t0
    claimed_total = sum(results[2:])
    if claimed_total != n or spans != n * s:
        raise RuntimeError(f"workload lost work: {claimed_total} of {n} rollouts, {spans} of {n * s} spans")
    return {
        "seconds": seconds,
        "rollouts_per_s": n / seconds,
        "span_ms": span_ms,
        "polls": polls,
        "empty_claims": empty_claims,
    }


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of another process so far (Linux /proc; NaN elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
