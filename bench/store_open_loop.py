"""Latency at a fixed load: the store server under an open-loop request stream from 100 callers.

    .venv/bin/python bench/store_open_loop.py [--callers 100] [--load 0.5] [--seconds 10] [--repeats 3]

1. **Capacity**: `--callers` coroutines send the operation mix back to back (closed loop) for
   `--seconds`; capacity = operations/s.
2. **Open loop at `--load` x capacity**: requests are *scheduled* at a fixed rate, whatever the
   answers do, and handed to the first free caller of `--callers`; each latency is measured from
   the scheduled time (so a queue building up counts — no coordinated omission).

The mix is one rollout's life in proportion: enqueue 1, dequeue (claim) 1, add_span S=6 (an LLM call's
~4 KB span), finish the attempt 1, query one rollout's spans 1. Attempts to add spans to and to
finish, and rollouts to query, are created before the clock starts. Server: `python -m
lightningstore.server` on a SQLite file, one StoreClient with keep-alive connections (one per
caller; this process freezes its startup objects out of the cyclic GC, as the server does).
Prints p50/p99/max per operation (median of `--repeats` runs, range).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from shape import percentile, span_attributes  # noqa: E402
from store_http import _free_port, start_server  # noqa: E402

from lightningstore import RolloutRequest, SpanIn  # noqa: E402
from lightningstore.client.store_client import StoreClient  # noqa: E402

MIX = (("enqueue", 1), ("dequeue", 1), ("add_span", 6), ("finish", 1), ("query_spans", 1))


class Workload:
    """The operations, with the rollouts and attempts they act on made ahead of time."""

    def __init__(self, client: StoreClient, rng: random.Random) -> None:
        self.client = client
        self.attrs = [span_attributes(rng) for _ in range(32)]
        self.running: list[tuple[str, str]] = []
        self.to_finish: list[tuple[str, str]] = []
        self.finished: list[str] = []
        self.span_index = itertools.count()

    async def prepare(self, attempts: int) -> None:
        """Claimed attempts to add spans to and to finish, and rollouts of S=6 spans to query (apart
        from the ones spans are added to, so that a query's answer stays one rollout's size)."""
        await self.client.enqueue_many_rollouts(
            [RolloutRequest(input={"i": i}) for i in range(attempts + 96)]
        )
        claimed = await self.client.dequeue_many_rollouts(attempts + 96)
        pairs = [(c.rollout_id, c.attempt.attempt_id) for c in claimed]
        self.running, queried, self.to_finish = pairs[:64], pairs[64:96], pairs[96:]
        for rollout_id, attempt_id in queried:
            spans = [self._span(rollout_id, attempt_id) for _ in range(6)]
            await self.client.add_many_spans(spans)
            self.finished.append(rollout_id)

    def _span(self, rollout_id: str, attempt_id: str) -> SpanIn:
        k = next(self.span_index)
        return SpanIn(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            trace_id=f"{rollout_id}-trace",
            span_id=f"s{k}",
            name="chat",
            attributes=self.attrs[k % len(self.attrs)],
        )

    def operation(self, name: str, k: int) -> Callable[[], Awaitable[object]]:
        client = self.client
        if name == "enqueue":
            return lambda: client.enqueue_rollout({"k": k})
        if name == "dequeue":
            return lambda: client.dequeue_rollout()
        if name == "add_span":
            rollout_id, attempt_id = self.running[k % len(self.running)]
            return lambda: client.add_span(self._span(rollout_id, attempt_id))
        if name == "finish":
            rollout_id, attempt_id = self.to_finish.pop()
            return lambda: client.update_attempt(rollout_id, attempt_id, status="succeeded")
        rollout_id = self.finished[k % len(self.finished)]
        return lambda: client.query_spans(rollout_id)


def schedule(rng: random.Random) -> itertools.cycle[str]:
    names = [name for name, weight in MIX for _ in range(weight)]
    rng.shuffle(names)
    return itertools.cycle(names)


async def closed_loop(work: Workload, callers: int, seconds: float, rng: random.Random) -> float:
    names = schedule(rng)
    done = 0
    stop = time.perf_counter() + seconds

    async def caller() -> None:
        nonlocal done
        k = 0
        while time.perf_counter() < stop:
            k += 1
            await work.operation(next(names), k)()
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    return done / (time.perf_counter() - started)


async def open_loop(
    work: Workload, callers: int, rate: float, seconds: float, rng: random.Random
) -> dict[str, list[float]]:
    names = schedule(rng)
    latencies: dict[str, list[float]] = {name: [] for name, _ in MIX}
    free = asyncio.Semaphore(callers)
    tasks = []

    async def one(name: str, call: Callable[[], Awaitable[object]], due: float) -> None:
        async with free:
            await call()
        latencies[name].append((time.perf_counter() - due) * 1000)

    start = time.perf_counter() + 0.05
    for k in range(int(rate * seconds)):
        due = start + k / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        name = next(names)
        tasks.append(asyncio.create_task(one(name, work.operation(name, k), due)))
    await asyncio.gather(*tasks)
    return latencies


async def one_run(
    callers: int, load: float, seconds: float, seed: int
) -> tuple[float, dict[str, list[float]]]:
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        proc = start_server(Path(tmp) / "bench.db", port)
        try:
            async with StoreClient(f"http://127.0.0.1:{port}", max_connections=callers + 8) as client:
                rng = random.Random(seed)
                # Enough attempts to finish in both phases (capacity is found first, so over-provision).
                work = Workload(client, rng)
                await work.prepare(attempts=6000)
                # The measuring client's own full GC passes would show up as server latency.
                gc.collect()
                gc.freeze()
                capacity = await closed_loop(work, callers, seconds, rng)
                rate = load * capacity
                needed = int(rate * seconds * 1 / 10) + 10
                if len(work.to_finish) < needed:
                    await work.prepare(attempts=needed)
                return capacity, await open_loop(work, callers, rate, seconds, rng)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--callers", type=int, default=100)
    parser.add_argument("--load", type=float, default=0.5, help="open-loop rate as a fraction of capacity")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs = []
    for k in range(args.repeats):
        capacity, latencies = asyncio.run(one_run(args.callers, args.load, args.seconds, seed=k))
        runs.append((capacity, latencies))
        worst = max(percentile(v, 0.99) for v in latencies.values())
        print(f"repeat {k + 1}: capacity {capacity:.0f} ops/s, open loop at {args.load * capacity:.0f} ops/s, "
              f"worst p99 {worst:.1f} ms", flush=True)  # fmt: skip

    def cell(values: list[float]) -> str:
        med = statistics.median(values)
        return f"{med:.1f} ({min(values):.1f}–{max(values):.1f})" if len(values) > 1 else f"{med:.1f}"

    capacities = [c for c, _ in runs]
    print(
        f"\n{args.callers} callers, open loop at {args.load:.0%} of capacity "
        f"(capacity {cell(capacities)} ops/s), {args.seconds:.0f} s, median of {args.repeats} (min–max), ms\n"
    )
    print("| operation | share | p50 | p99 | max |")
    print("|---|---|---|---|---|")
    total = sum(w for _, w in MIX)
    for name, weight in MIX:
        p50 = [percentile(lat[name], 0.5) for _, lat in runs]
        p99 = [percentile(lat[name], 0.99) for _, lat in runs]
        top = [max(lat[name]) for _, lat in runs]
        print(f"| {name} | {weight / total:.0%} | {cell(p50)} | {cell(p99)} | {cell(top)} |")


if __name__ == "__main__":
    main()
