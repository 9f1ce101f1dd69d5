"""The store bench workload, shared by bench/store.py (in-process) and the HTTP bench."""

from __future__ import annotations

import asyncio
import random
import string
import time
from dataclasses import dataclass, field

from lightningstore import LightningStore, RolloutRequest, SpanIn


def make_spans(rollout_id: str, attempt_id: str, count: int, rng: random.Random) -> list[SpanIn]:
    """`count` spans of ~2 KB text plus ~200 token ids each, like an LLM call span."""
    text = "".join(rng.choices(string.ascii_letters + " ", k=2048))
    return [
        SpanIn(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            trace_id=f"{rollout_id}-trace",
            span_id=f"s{i}",
            name="chat",
            start_time=time.time(),
            end_time=time.time(),
            attributes={
                "lightningrl.llm.response_text": text,
                "lightningrl.llm.prompt_token_ids": [rng.randrange(50000) for _ in range(150)],
                "lightningrl.llm.response_token_ids": [rng.randrange(50000) for _ in range(50)],
            },
        )
        for i in range(count)
    ]


@dataclass
class WorkloadResult:
    rollouts: int
    spans: int
    seconds: float
    query_seconds: float
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def rollouts_per_s(self) -> float:
        return self.rollouts / self.seconds

    @property
    def spans_per_s(self) -> float:
        return self.spans / self.seconds

    def percentile(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run_workload(store: LightningStore, n: int, r: int, s: int, seed: int = 0) -> WorkloadResult:
    """Enqueue n rollouts; r workers each claim -> add_many_spans(s) -> finish; then query all spans."""
    rng = random.Random(seed)
    rollouts = await store.enqueue_many_rollouts([RolloutRequest(input={"i": i}) for i in range(n)])
    latencies: list[float] = []

    async def timed(coro):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        out = await coro
        latencies.append((time.perf_counter() - t0) * 1000)
        return out

    async def worker(k: int) -> int:
        done = 0
        while (claimed := await timed(store.dequeue_rollout(f"bench-{k}"))) is not None:
            spans = make_spans(claimed.rollout_id, claimed.attempt_id, s, rng)
            await timed(store.add_many_spans(spans))
            await timed(store.update_attempt(claimed.rollout_id, claimed.attempt_id, status="succeeded"))
            done += 1
        return done

    t0 = time.perf_counter()
    finished = sum(await asyncio.gather(*(worker(k) for k in range(r))))
    seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    total = 0
    for rollout in rollouts:
        total += len(await store.query_spans(rollout.rollout_id))
    query_seconds = time.perf_counter() - t1
    assert finished == n and total == n * s, (finished, total)
    return WorkloadResult(
        rollouts=n, spans=n * s, seconds=seconds, query_seconds=query_seconds, latencies_ms=latencies
    )
