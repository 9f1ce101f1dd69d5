"""The store bench over HTTP: a real `lightningstore.server` process on a SQLite file, StoreClient workers.

    .venv/bin/python bench/store_http.py --n 2000 --r 32 --s 6
    .venv/bin/python bench/store_http.py --n 2000 --r 100 --s 20

Runs bench/workload.py's `run_workload` (N rollouts; R workers each claim -> add_many_spans(S spans of
~2 KB text + ~200 token ids) -> finish; then query every rollout's spans) through a StoreClient and
prints rollouts/s, spans/s and per-call latency p50/p99. `bench_http(db_path, n, r, s)` returns the
WorkloadResult (bench/store.py --http calls it).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workload import WorkloadResult, run_workload  # noqa: E402

from lightningstore.client.store_client import StoreClient  # noqa: E402
from lightningstore.server.run import free_port as _free_port


def start_server(db: Path, port: int, timeout: float = 30.0) -> subprocess.Popen[bytes]:
    """Start `python -m lightningstore.server` and wait (bounded) until /healthz answers."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lightningstore.server", "--db", str(db), "--port", str(port)],
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("server did not start")


async def run_http_workload(db: Path, n: int, r: int, s: int) -> WorkloadResult:
    """Start a server on the SQLite file `db`, run the workload through a StoreClient, stop the server."""
    port = _free_port()
    proc = start_server(db, port)
    try:
        async with StoreClient(f"http://127.0.0.1:{port}", max_connections=max(r * 2, 64)) as client:
            return await run_workload(client, n, r, s)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def bench_http(db: Path, n: int, r: int, s: int) -> WorkloadResult:
    """Synchronous form for bench/store.py --http."""
    return asyncio.run(run_http_workload(db, n, r, s))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--r", type=int, default=32)
    parser.add_argument("--s", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        res = bench_http(Path(tmp) / "bench.db", args.n, args.r, args.s)
    print(
        f"http N={args.n} R={args.r} S={args.s}: {res.rollouts_per_s:.1f} rollouts/s, "
        f"{res.spans_per_s:.0f} spans/s, call latency p50 {res.percentile(0.5):.1f} ms "
        f"p99 {res.percentile(0.99):.1f} ms (run {res.seconds:.1f} s, query all spans {res.query_seconds:.1f} s)"
    )


if __name__ == "__main__":
    main()
