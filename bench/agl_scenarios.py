"""Load at Agent Lightning's own store-benchmark shapes, against our server on SQLite and on PostgreSQL.

    .venv/bin/python bench/agl_scenarios.py [--scale 1.0] [--repeats 3] [--limit 240] [--pg-url URL]

Each scenario keeps Agent Lightning's concurrency (runners, and clients per runner) and scales the task
count down for a 2-core machine (the `÷` column). Runners are asyncio coroutines sharing one StoreClient
over real HTTP to `python -m lightningstore.server` in a subprocess on 127.0.0.1. A runner loops
(bounded by the scenario's time limit): dequeue; `rounds` spans, one `add_span` each (~4 KB LLM-call
spans, bench/shape.py's); one reward; `update_attempt(succeeded)`. The algorithm enqueues `batch`
rollouts with one `enqueue_many_rollouts` and waits for that batch (`wait_for_rollouts`) before the next.

Every HTTP request's status and latency is recorded at the client's connection pool (so retried 5xx and
429 count too; the long-poll `/v1/rollouts/wait` is left out of the latency). At the end the store is
asked, per rollout: status succeeded, `num_attempts` 1, `rounds` spans, 1 reward; a rollout not
succeeded is lost, one with more attempts, spans or rewards (or claimed twice) is duplicated. Server RSS
is the peak (VmHWM) of the server's processes. Without `--pg-url` a throwaway cluster is started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from shape import IDLE_SECONDS, percentile, span_attributes  # noqa: E402
from store_vs_agl import spread  # noqa: E402
from store_workers import fresh_pg_database, postgres, start  # noqa: E402

from lightningstore import RolloutRequest, SpanIn  # noqa: E402
from lightningstore.client.store_client import StoreClient  # noqa: E402
from lightningstore.data.reward import RewardIn  # noqa: E402

WAIT_PATH = "/v1/rollouts/wait"


@dataclass(frozen=True)
class Scenario:
    name: str
    agl: str
    """Agent Lightning's shape, as its CI runs it."""
    agl_tasks: int
    tasks: int
    batch: int
    runners: int
    per_runner: int
    """Concurrent clients per runner (runners x per_runner requests in flight at most)."""
    rounds: int


SCENARIOS = [
    Scenario("batch", "4,096 tasks, batch 256, 32 runners, 6 rounds", 4096, 512, 256, 32, 1, 6),
    Scenario("100 runners", "10,000 tasks, 100 runners", 10_000, 1000, 500, 100, 1, 6),
    Scenario(
        "2,048 concurrent", "50,000 tasks, 2,048 concurrent, 256 runners", 50_000, 2048, 2048, 256, 8, 6
    ),
    Scenario("deep traces", "10,000 tasks, 20 rounds, 512 runners", 10_000, 512, 512, 512, 1, 20),
]


@dataclass
class Traffic:
    """What the client's pool saw: each request's status and latency, and transport errors."""

    statuses: Counter[int] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    transport_errors: Counter[str] = field(default_factory=Counter)


class CountingPool:
    """Wraps a StoreClient's connection pool to record every request it sends."""

    def __init__(self, inner: Any, traffic: Traffic) -> None:
        self.inner = inner
        self.traffic = traffic

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            response = await self.inner.request(method, path, **kwargs)
        except Exception as exc:
            self.traffic.transport_errors[type(exc).__name__] += 1
            raise
        if path != WAIT_PATH:
            self.traffic.latencies_ms.append((time.perf_counter() - t0) * 1000)
        self.traffic.statuses[response.status_code] += 1
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def peak_rss_mb(pid: int) -> float:
    """Sum of VmHWM (peak resident set) over a process and its children, in MB."""
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return float("nan")
    total_kb = 0
    for proc in procs:
        with contextlib.suppress(OSError), open(f"/proc/{proc.pid}/status") as f:
            total_kb += next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), 0)
    return total_kb / 1024


async def drive(client: StoreClient, sc: Scenario, limit: float) -> dict[str, Any]:
    """Run one scenario to completion or to `limit` seconds; return rate, claims and errors."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    rng = random.Random(0)
    pool = [span_attributes(rng) for _ in range(64)]
    stop = asyncio.Event()
    claims: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    ids: list[str] = []

    async def runner(worker: str, k: int) -> None:
        done = 0
        while not stop.is_set() and loop.time() < deadline:
            try:
                claimed = await client.dequeue_rollout(worker)
                if claimed is None:
                    await asyncio.sleep(IDLE_SECONDS * rng.uniform(0.5, 1.5))
                    continue
                rid, aid = claimed.rollout_id, claimed.attempt_id
                claims[rid] += 1
                for j in range(sc.rounds):
                    attrs = pool[(done * sc.rounds + j + k) % len(pool)]
                    span = SpanIn(rollout_id=rid, attempt_id=aid, trace_id=f"{rid}-t", span_id=f"s{j}",
                                  name="chat", attributes=attrs)  # fmt: skip
                    await client.add_span(span)
                await client.add_reward(RewardIn(rollout_id=rid, attempt_id=aid, value=1.0))
                await client.update_attempt(rid, aid, status="succeeded")
                done += 1
            except Exception as exc:  # counted and reported; the runner goes on, as a real one would
                errors[f"{type(exc).__name__}: {str(exc)[:160]}"] += 1

    async def algorithm() -> bool:
        try:
            for first in range(0, sc.tasks, sc.batch):
                count = min(sc.batch, sc.tasks - first)
                requests = [RolloutRequest(input={"i": first + i}) for i in range(count)]
                batch = [r.rollout_id for r in await client.enqueue_many_rollouts(requests)]
                ids.extend(batch)
                left = deadline - loop.time()
                if left <= 0 or len(await client.wait_for_rollouts(batch, timeout=left)) < count:
                    return False
            return True
        finally:
            stop.set()

    t0 = time.perf_counter()
    tasks = [
        runner(f"runner-{k}", k * sc.per_runner + c) for k in range(sc.runners) for c in range(sc.per_runner)
    ]
    completed, *_ = await asyncio.gather(algorithm(), *tasks)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "completed": completed, "ids": ids, "claims": claims, "errors": errors}


async def audit(client: StoreClient, ids: list[str], rounds: int, claims: Counter[str]) -> dict[str, int]:
    """Ask the store about every enqueued rollout: lost (not succeeded) and duplicated work."""
    lost = duplicated = 0
    for first in range(0, len(ids), 1000):
        chunk = ids[first : first + 1000]
        rollouts = {r.rollout_id: r for r in await client.query_rollouts(rollout_ids=chunk, limit=len(chunk))}
        spans = await client.query_spans_many(chunk, attempt=None)
        rewards = await client.query_rewards_many(chunk)
        for rid in chunk:
            r = rollouts.get(rid)
            if r is None or r.status != "succeeded":
                lost += 1
            elif r.num_attempts != 1 or claims[rid] != 1 or len(spans.get(rid, [])) != rounds or len(rewards.get(rid, [])) != 1:  # fmt: skip
                duplicated += 1
    return {
        "lost": lost,
        "duplicated": duplicated,
        "extra_claims": sum(c - 1 for c in claims.values() if c > 1),
    }


def start_logged(db: str, log_path: Path, tries: int = 3) -> tuple[subprocess.Popen[bytes], str]:
    """start() with the server's output appended to `log_path`; a failed start is retried, its log tail shown."""
    for attempt in range(tries):
        with open(log_path, "ab") as log:
            try:
                return start(db, 1, log)
            except RuntimeError as exc:
                tail = log_path.read_text(errors="replace").splitlines()[-8:]
                print(f"server start {attempt + 1}/{tries} failed: {exc}; log tail: {tail}", flush=True)
    raise RuntimeError(f"server did not start in {tries} tries on {db}")


async def one_run(db: str, sc: Scenario, limit: float, log_path: Path) -> dict[str, Any]:
    proc, url = start_logged(db, log_path)
    traffic = Traffic()
    load0 = os.getloadavg()
    try:
        client = StoreClient(url, max_connections=sc.runners * sc.per_runner + 8)
        client._pool = CountingPool(client._pool, traffic)  # type: ignore[assignment]  # observe only
        try:
            out = await asyncio.wait_for(drive(client, sc, limit), timeout=limit + 60)
            out.update(await audit(client, out.pop("ids"), sc.rounds, out["claims"]))
        finally:
            await client.close()
        out["rss_mb"] = peak_rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    out["rollouts_per_s"] = (sc.tasks - out["lost"]) / out["seconds"]
    out["p99_ms"] = percentile(traffic.latencies_ms, 0.99)
    out["requests"] = len(traffic.latencies_ms)
    out["status_5xx"] = sum(n for s, n in traffic.statuses.items() if s >= 500)
    out["statuses"] = dict(traffic.statuses)
    out["transport_errors"] = dict(traffic.transport_errors)
    out["load"] = (load0[0], os.getloadavg()[0])
    del out["claims"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg-url", default=os.environ.get("LIGHTNINGRL_TEST_PG_URL"))
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every scenario's task count")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=float, default=240.0, help="seconds per scenario run")
    parser.add_argument("--log", type=Path, default=Path(tempfile.gettempdir()) / "agl_scenarios_server.log")
    parser.add_argument("--only", nargs="+", choices=[s.name for s in SCENARIOS])
    args = parser.parse_args()
    if not 0 < args.scale <= 100:
        raise SystemExit(f"--scale must be in (0, 100], got {args.scale}")
    chosen = [s for s in SCENARIOS if not args.only or s.name in args.only]
    scenarios = [
        Scenario(
            **{
                **s.__dict__,
                "tasks": max(1, round(s.tasks * args.scale)),
                "batch": min(s.batch, max(1, round(s.tasks * args.scale))),
            }
        )  # fmt: skip
        for s in chosen
    ]
    print("uptime at start:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with postgres(args.pg_url) as pg_url, tempfile.TemporaryDirectory() as tmp:
        log = args.log
        log.write_bytes(b"")
        for k in range(args.repeats):
            for sc in scenarios:
                for backend in ("SQLite", "PostgreSQL"):
                    db = (
                        str(Path(tmp) / f"{sc.name}-{k}.db")
                        if backend == "SQLite"
                        else fresh_pg_database(pg_url)
                    )
                    out = asyncio.run(one_run(db, sc, args.limit, log))
                    rows.setdefault((sc.name, backend), []).append(out)
                    print(f"repeat {k + 1} {sc.name} {backend}: " + ", ".join(f"{key}={v}" for key, v in out.items()
                          if key != "errors") + f", errors={dict(out['errors'].most_common(3))}", flush=True)  # fmt: skip
        text = log.read_text(errors="replace").splitlines()
        bad = [line for line in text if any(w in line for w in ("Traceback", "ERROR", " 500 ", " 503 "))]
        print(f"server log: {len(text)} lines, {len(bad)} with Traceback/ERROR/500/503; first: {bad[:5]}")
    print("uptime at end:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(
        f"\n{os.cpu_count()} CPUs, median of {args.repeats} (min–max), time limit {args.limit:.0f} s per run\n"
    )
    print("| scenario (Agent Lightning's shape) | tasks here (÷) | backend | rollouts/s | p99 request ms "
          "| 5xx | lost / duplicated | server peak RSS MB |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for sc in scenarios:
        for backend in ("SQLite", "PostgreSQL"):
            runs = rows[(sc.name, backend)]
            cells = [
                f"{sc.name} ({sc.agl})",
                f"{sc.tasks} (÷{sc.agl_tasks / sc.tasks:.0f}), batch {sc.batch}, {sc.runners}×{sc.per_runner} clients, {sc.rounds} rounds",  # noqa: E501
                backend,
                spread([x["rollouts_per_s"] for x in runs]),
                spread([x["p99_ms"] for x in runs], "{:.0f}"),
                "/".join(str(x["status_5xx"]) for x in runs),
                "/".join(f"{x['lost']}+{x['duplicated']}" for x in runs),
                spread([x["rss_mb"] for x in runs], "{:.0f}"),
            ]
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
