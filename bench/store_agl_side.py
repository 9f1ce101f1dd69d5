"""The anchor's side of bench/store_vs_agl.py: Agent Lightning 0.3.0's store on bench/shape.py's workload.

Run with the interpreter of a venv that has `agentlightning==0.3.0` (never the project's venv):

    /tmp/venv-agl/bin/python bench/store_agl_side.py --mode http --n 300 --r 32 --s 6
    /tmp/venv-agl/bin/python bench/store_agl_side.py --mode memory --n 300 --r 32 --s 6

`--mode http` starts `python -m agentlightning.cli.store` (its LightningStoreServer on an
InMemoryLightningStore, the `agl store` command) in a subprocess and drives it with a
LightningStoreClient; `--mode memory` drives an InMemoryLightningStore in this process. `--batch`
writes each rollout's spans with one `add_many_spans` (its client sends them one request each). Prints
one JSON line: seconds, rollouts_per_s, add_span p99 (ms), this process's and the server's CPU seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agentlightning.store import InMemoryLightningStore, LightningStoreClient  # noqa: E402
from agentlightning.types import Span  # noqa: E402
from shape import drive, percentile, process_cpu_seconds  # noqa: E402


class AglAdapter:
    """bench/shape.py's calls in Agent Lightning's API; span sequence ids are numbered here (no round trip)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def _span(self, rollout_id: str, attempt_id: str, index: int, attrs: dict[str, Any]) -> Span:
        now = time.time()
        return Span(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=index + 1,
            trace_id=f"{rollout_id}-trace",
            span_id=f"s{index}",
            parent_id=None,
            name="chat",
            status={"status_code": "OK"},
            attributes=attrs,
            events=[],
            links=[],
            start_time=now,
            end_time=now,
            context=None,
            parent=None,
            resource={"attributes": {}, "schema_url": ""},
        )

    async def enqueue(self, i: int) -> str:
        return (await self.store.enqueue_rollout(input={"i": i})).rollout_id

    async def claim(self, worker: str) -> tuple[str, str] | None:
        claimed = await self.store.dequeue_rollout(worker_id=worker)
        return None if claimed is None else (claimed.rollout_id, claimed.attempt.attempt_id)

    async def add_span(self, rollout_id: str, attempt_id: str, index: int, attrs: dict[str, Any]) -> None:
        await self.store.add_span(self._span(rollout_id, attempt_id, index, attrs))

    async def add_spans(self, rollout_id: str, attempt_id: str, attrs: list[dict[str, Any]]) -> None:
        await self.store.add_many_spans(
            [self._span(rollout_id, attempt_id, j, a) for j, a in enumerate(attrs)]
        )

    async def finish(self, rollout_id: str, attempt_id: str) -> None:
        await self.store.update_attempt(rollout_id, attempt_id, status="succeeded")

    async def finished(self, rollout_ids: list[str]) -> list[str]:
        return [r.rollout_id for r in await self.store.wait_for_rollouts(rollout_ids=rollout_ids, timeout=0)]

    async def count_spans(self, rollout_id: str) -> int:
        return len(list(await self.store.query_spans(rollout_id)))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(port: int, timeout: float = 60.0) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentlightning.cli.store", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "WARNING"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"agl store exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/agl/health", timeout=1) as response:
                if response.status == 200:
                    return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("agl store did not start")


async def run(mode: str, n: int, r: int, s: int, batch: bool) -> dict[str, Any]:
    if mode == "memory":
        cpu0 = time.process_time()
        out = await drive(AglAdapter(InMemoryLightningStore()), n, r, s, batch=batch)
        out["client_cpu_s"] = time.process_time() - cpu0
        return out
    port = _free_port()
    proc = start_server(port)
    client = LightningStoreClient(f"http://127.0.0.1:{port}")
    try:
        cpu0, server0 = time.process_time(), process_cpu_seconds(proc.pid)
        out = await drive(AglAdapter(client), n, r, s, batch=batch)
        out["client_cpu_s"] = time.process_time() - cpu0
        out["server_cpu_s"] = process_cpu_seconds(proc.pid) - server0
        return out
    finally:
        await client.close()
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["http", "memory"], required=True)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--r", type=int, default=32)
    parser.add_argument("--s", type=int, default=6)
    parser.add_argument("--batch", action="store_true")
    args = parser.parse_args()
    out = asyncio.run(run(args.mode, args.n, args.r, args.s, args.batch))
    span_ms = out.pop("span_ms")
    out["add_span_p99_ms"] = percentile(span_ms, 0.99)
    out["add_span_p50_ms"] = percentile(span_ms, 0.5)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
