"""Scale-out of the store server: `--workers 1, 2, 4` processes on one PostgreSQL, on the headline workload.

    .venv/bin/python bench/store_workers.py [--pg-url postgresql://...] [--n 2000] [--repeats 3]

The workload is bench/shape.py's (N rollouts enqueued one by one, R runner coroutines claiming,
writing S spans each and finishing, the algorithm polling; then one span query per rollout), driven
through a StoreClient against `python -m lightningstore.server --db <fresh PostgreSQL database>
--workers W`. Without `--pg-url` (or $LIGHTNINGRL_TEST_PG_URL) a throwaway cluster is started with
scripts/pg-throwaway (fsync off, as in the tests). A single-process server on a SQLite file is the
reference row. Prints rollouts/s (median of `--repeats`, min–max) and the CPU per rollout of the
client, of all server processes together and of PostgreSQL's backends.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import psutil
import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from shape import drive  # noqa: E402
from store_http import _free_port  # noqa: E402
from store_vs_agl import OurAdapter, spread  # noqa: E402

from lightningstore.client.store_client import StoreClient  # noqa: E402


def cpu_seconds(procs: list[psutil.Process]) -> float:
    """User + system CPU seconds of `procs` so far (processes that ended meanwhile count 0)."""
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its children so far."""
    try:
        root = psutil.Process(pid)
        return cpu_seconds([root, *root.children(recursive=True)])
    except psutil.NoSuchProcess:
        return float("nan")


def postgres_cpu() -> float:
    """CPU seconds of every `postgres` process on the machine (the bench's cluster's backends)."""
    return cpu_seconds([p for p in psutil.process_iter(["name"]) if p.info["name"] == "postgres"])


def start(db: str, workers: int, log: IO[bytes] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """Start the server on `db` (its output to `log` when given) and wait, bounded, for /healthz."""
    port = _free_port()
    command = [sys.executable, "-m", "lightningstore.server", "--db", db, "--port", str(port)]
    proc = subprocess.Popen([*command, "--workers", str(workers)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("server did not start")


async def one_run(db: str, workers: int, n: int, r: int, s: int, batch: bool) -> dict[str, Any]:
    proc, url = start(db, workers)
    me = psutil.Process()
    try:
        time.sleep(1.0)  # every worker has imported and connected
        client = StoreClient(url, max_connections=max(2 * r, 64))
        cpu0, server0, pg0 = sum(me.cpu_times()[:2]), tree_cpu(proc.pid), postgres_cpu()
        try:
            out = await drive(OurAdapter(client), n, r, s, batch=batch)
        finally:
            await client.close()
        out["client_cpu_s"] = sum(me.cpu_times()[:2]) - cpu0
        out["server_cpu_s"] = tree_cpu(proc.pid) - server0
        out["pg_cpu_s"] = postgres_cpu() - pg0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return out


def fresh_pg_database(server_url: str) -> str:
    name = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + f"/{name}"


@contextlib.contextmanager
def postgres(url: str | None) -> Iterator[str]:
    """`url` as given, else a throwaway cluster from scripts/pg-throwaway (fsync off), stopped on exit."""
    if url:
        yield url
        return
    script = str(HERE.parent / "scripts" / "pg-throwaway")
    started = subprocess.run([script, "start"], capture_output=True, text=True, check=True)
    env = dict(line.removeprefix("export ").split("=", 1) for line in started.stdout.split("\n") if line)
    try:
        yield env["LIGHTNINGRL_TEST_PG_URL"]
    finally:
        subprocess.run([script, "stop", env["LIGHTNINGRL_PG_DIR"]], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg-url", default=os.environ.get("LIGHTNINGRL_TEST_PG_URL"))
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--r", type=int, default=32)
    parser.add_argument("--s", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--batch", action="store_true", help="one add_many_spans per rollout (default: add_span each)"
    )
    args = parser.parse_args()
    rows: dict[str, list[dict[str, Any]]] = {}
    with postgres(args.pg_url) as pg_url:
        with tempfile.TemporaryDirectory() as tmp:
            for k in range(args.repeats):
                arms = [("SQLite file, 1 process", str(Path(tmp) / f"r{k}.db"), 1)]
                arms += [(f"PostgreSQL, {w} process{'es' if w > 1 else ''}", "", w) for w in args.workers]
                for label, db, workers in arms:
                    db = db or fresh_pg_database(pg_url)
                    out = asyncio.run(one_run(db, workers, args.n, args.r, args.s, args.batch))
                    rows.setdefault(label, []).append(out)
                    print(f"repeat {k + 1} {label}: {out['rollouts_per_s']:.1f} rollouts/s", flush=True)
    spans = "one add_many_spans per rollout" if args.batch else "add_span each"
    print(
        f"\nN={args.n} R={args.r} S={args.s} ({spans}), {os.cpu_count()} CPUs, median of {args.repeats} (min–max)\n"
    )
    print(
        "| server | rollouts/s | client CPU ms/rollout | server CPU ms/rollout | PostgreSQL CPU ms/rollout |"
    )
    print("|---|---|---|---|---|")
    for label, runs in rows.items():
        per = {
            key: [1000 * x[key] / args.n for x in runs]
            for key in ("client_cpu_s", "server_cpu_s", "pg_cpu_s")
        }
        cells = [spread([x["rollouts_per_s"] for x in runs])] + [spread(per[key], "{:.2f}") for key in per]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("\n(SQLite's row: PostgreSQL CPU is whatever else the cluster did meanwhile, ~0.)")


if __name__ == "__main__":
    main()
