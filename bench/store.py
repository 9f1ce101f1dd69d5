"""Store bench: N rollouts, R workers, each claim -> S spans (~2 KB text + ~200 token ids) -> finish,
then query every rollout's spans. Prints rollouts/s and spans/s for SQLite and PostgreSQL (and HTTP
with --http), plus the floor: raw sqlite3 executemany of the same span rows.

    .venv/bin/python bench/store.py --n 2000 --r 32 --s 6
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import orjson
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from workload import WorkloadResult, make_spans, run_workload  # noqa: E402

from lightningstore import RolloutRequest, SqlStore  # noqa: E402


async def bench_sql(url: str, n: int, r: int, s: int) -> WorkloadResult:
    store = SqlStore(url)
    await store.ensure_schema()
    try:
        return await run_workload(store, n, r, s)
    finally:
        await store.close()


async def ingest_store(path: Path, n: int, s: int) -> float:
    """Seconds for add_many_spans of n batches of s spans (one attempt per batch)."""
    store = SqlStore(path)
    await store.ensure_schema()
    made = await store.enqueue_many_rollouts([RolloutRequest(input=i) for i in range(n)])
    claimed = await store.dequeue_many_rollouts(n)
    rng = random.Random(0)
    batches = [make_spans(c.rollout_id, c.attempt_id, s, rng) for c in claimed]
    assert len(made) == len(batches)
    t0 = time.perf_counter()
    for batch in batches:
        await store.add_many_spans(batch)
    seconds = time.perf_counter() - t0
    await store.close()
    return seconds


def ingest_raw_floor(path: Path, n: int, s: int) -> float:
    """Seconds for raw sqlite3 executemany of the same span rows, one batch + commit per attempt."""
    rng = random.Random(0)
    batches = [make_spans(f"r{i}", f"a{i}", s, rng) for i in range(n)]
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE TABLE spans (sequence_id INTEGER PRIMARY KEY, rollout_id TEXT, attempt_id TEXT, trace_id TEXT,"
        " span_id TEXT, parent_id TEXT, name TEXT, kind TEXT, start_time REAL, end_time REAL, attributes TEXT,"
        " events TEXT, status TEXT, resource TEXT, UNIQUE (attempt_id, span_id))"
    )
    t0 = time.perf_counter()
    for batch in batches:
        rows = [
            (
                sp.rollout_id,
                sp.attempt_id,
                sp.trace_id,
                sp.span_id,
                sp.parent_id,
                sp.name,
                sp.kind,
                sp.start_time,
                sp.end_time,
                orjson.dumps(sp.attributes).decode(),
                "[]",
                '{"status_code": "UNSET"}',
                "{}",
            )
            for sp in batch
        ]
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO spans (rollout_id, attempt_id, trace_id, span_id, parent_id, name, kind, start_time,"
            " end_time, attributes, events, status, resource) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            rows,
        )
        conn.execute("COMMIT")
    seconds = time.perf_counter() - t0
    conn.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=2000, help="rollouts")
    parser.add_argument("--r", type=int, default=32, help="concurrent workers")
    parser.add_argument("--s", type=int, default=6, help="spans per rollout")
    parser.add_argument("--postgres", default=None, help="PostgreSQL URL (default: a throwaway cluster)")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--http", action="store_true", help="also run the workload over HTTP (store server)")
    parser.add_argument("--repeat", type=int, default=3, help="span ingest runs of each path (best counts)")
    args = parser.parse_args()

    console = Console(width=max(Console().width, 110))  # narrower wraps the backend names
    table = Table(title=f"LightningStore bench: N={args.n} R={args.r} S={args.s}")
    for col in ("backend", "rollouts/s", "spans/s", "call p50 ms", "call p99 ms", "query all spans s"):
        table.add_column(col, justify="right" if col != "backend" else "left")

    def add(name: str, res: WorkloadResult) -> None:
        table.add_row(
            name,
            f"{res.rollouts_per_s:.0f}",
            f"{res.spans_per_s:.0f}",
            f"{res.percentile(0.5):.1f}",
            f"{res.percentile(0.99):.1f}",
            f"{res.query_seconds:.2f}",
        )

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        console.print("running SQLite (in-process)...")
        add(
            "SqlStore SQLite (in-process)",
            asyncio.run(bench_sql(str(tmp_path / "bench.db"), args.n, args.r, args.s)),
        )

        pg_dir = None
        if not args.no_postgres:
            from backends import create_pg_database, start_throwaway_postgres, stop_throwaway_postgres

            server = args.postgres
            if server is None:
                server, pg_dir = start_throwaway_postgres()
            try:
                console.print("running PostgreSQL (in-process)...")
                add(
                    "SqlStore PostgreSQL (in-process)",
                    asyncio.run(bench_sql(create_pg_database(server), args.n, args.r, args.s)),
                )
            finally:
                if pg_dir:
                    stop_throwaway_postgres(pg_dir)

        if args.http:
            from store_http import bench_http

            console.print("running HTTP (store server + StoreClient, SQLite)...")
            add("StoreClient -> server (SQLite)", bench_http(tmp_path / "http.db", args.n, args.r, args.s))

        console.print("span ingest: add_many_spans vs raw sqlite3 floor...")
        # Best of --repeat runs each, alternating: on a shared machine one run of either can be
        # off by half, which swings the ratio more than any change measured with it.
        store_runs, raw_runs = [], []
        for i in range(args.repeat):
            store_runs.append(asyncio.run(ingest_store(tmp_path / f"ingest{i}.db", args.n, args.s)))
            raw_runs.append(ingest_raw_floor(tmp_path / f"raw{i}.db", args.n, args.s))
        store_s, raw_s = min(store_runs), min(raw_runs)

    console.print(table)
    spans = args.n * args.s
    ingest = Table(
        title=f"Span ingest, {args.n} batches of {args.s} spans (one commit per batch), best of {args.repeat}"
    )
    for col in ("path", "spans/s", "seconds", "x floor"):
        ingest.add_column(col)
    ingest.add_row("raw sqlite3 executemany (floor)", f"{spans / raw_s:.0f}", f"{raw_s:.2f}", "1.00")
    ingest.add_row(
        "SqlStore.add_many_spans", f"{spans / store_s:.0f}", f"{store_s:.2f}", f"{store_s / raw_s:.2f}"
    )
    console.print(ingest)
    console.print(
        "reference (measured on this machine): Agent Lightning 0.3.0 in-memory store ~200 rollouts/s"
        " (~1,200 spans/s) in-process at N=2000 R=32 S=6"
    )


if __name__ == "__main__":
    main()
