"""The headline store bench: LightningRL's store against Agent Lightning 0.3.0 on bench/shape.py's workload.

    .venv/bin/python bench/store_vs_agl.py --anchor-python /tmp/venv-agl/bin/python --n 2000 --repeats 3

Modes, each run for both stores in the same sitting (the anchor's side is bench/store_agl_side.py,
run with `--anchor-python`, an interpreter with `agentlightning==0.3.0`; without it the anchor
column says why it is empty):

- `http, add_span each`: ours is `python -m lightningstore.server` on a SQLite file with a StoreClient;
  theirs is `agl store` (LightningStoreServer on an InMemoryLightningStore) with a LightningStoreClient.
- `http, one batch per rollout`: the same, each rollout's spans in one `add_many_spans`.
- `in process, add_span each`: ours is a SqlStore on a SQLite file (WAL), theirs InMemoryLightningStore.

Prints one table (rollouts/s, median of `--repeats` with min-max; ratio of the medians), then the
in-process `add_span` p99, the client's and the server's CPU ms per rollout and the empty claims per rollout
(a runner that finds the queue empty asks again after ~50 ms, so a slow enqueue means more of them).

Install the anchor in its own venv, never the project's:
    python3.11 -m venv /tmp/venv-agl && /tmp/venv-agl/bin/pip install agentlightning==0.3.0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shape import drive, percentile, process_cpu_seconds  # noqa: E402
from store_http import _free_port, start_server  # noqa: E402

from lightningstore import LightningStore, SpanIn  # noqa: E402
from lightningstore.client.store_client import StoreClient  # noqa: E402
from lightningstore.sql import SqlStore  # noqa: E402
from runner.runner import MAX_IDLE_POLL_SECONDS  # noqa: E402

MODES = {
    "http-single": ("HTTP, spans one `add_span` each", "http", False),
    "http-batch": ("HTTP, one `add_many_spans` per rollout", "http", True),
    "inproc-single": ("in process (theirs in RAM, ours on a SQLite file), `add_span` each", "memory", False),
}


CLAIM_WAIT_SECONDS = MAX_IDLE_POLL_SECONDS
"""How long our side's claim waits for a rollout to be queued: as long as an idle Runner's does."""


class OurAdapter:
    """bench/shape.py's calls in LightningStore's API."""

    def __init__(self, store: LightningStore) -> None:
        self.store = store

    @staticmethod
    def _span(rollout_id: str, attempt_id: str, index: int, attrs: dict[str, Any]) -> SpanIn:
        return SpanIn(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            trace_id=f"{rollout_id}-trace",
            span_id=f"s{index}",
            name="chat",
            attributes=attrs,
        )

    async def enqueue(self, i: int) -> str:
        return (await self.store.enqueue_rollout({"i": i})).rollout_id

    async def claim(self, worker: str) -> tuple[str, str] | None:
        # Our API's waiting claim, as our Runner uses it: an idle runner's claim waits for the next
        # rollout queued instead of asking again and again.
        claimed = await self.store.dequeue_rollout(worker, wait=CLAIM_WAIT_SECONDS)
        return None if claimed is None else (claimed.rollout_id, claimed.attempt_id)

    async def add_span(self, rollout_id: str, attempt_id: str, index: int, attrs: dict[str, Any]) -> None:
        await self.store.add_span(self._span(rollout_id, attempt_id, index, attrs))

    async def add_spans(self, rollout_id: str, attempt_id: str, attrs: list[dict[str, Any]]) -> None:
        await self.store.add_many_spans(
            [self._span(rollout_id, attempt_id, j, a) for j, a in enumerate(attrs)]
        )

    async def finish(self, rollout_id: str, attempt_id: str) -> None:
        await self.store.update_attempt(rollout_id, attempt_id, status="succeeded")

    async def finished(self, rollout_ids: list[str]) -> list[str]:
        return [r.rollout_id for r in await self.store.wait_for_rollouts(rollout_ids, timeout=0)]

    async def count_spans(self, rollout_id: str) -> int:
        return len(await self.store.query_spans(rollout_id))


async def run_ours(where: str, batch: bool, n: int, r: int, s: int) -> dict[str, Any]:
    me = psutil.Process()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        if where == "memory":
            store: LightningStore = SqlStore(db)
            await store.ensure_schema()
            proc = None
        else:
            port = _free_port()
            proc = start_server(db, port)
            store = StoreClient(f"http://127.0.0.1:{port}", max_connections=max(2 * r, 64))
        try:
            cpu0 = sum(me.cpu_times()[:2])
            server0 = process_cpu_seconds(proc.pid) if proc is not None else float("nan")
            out = await drive(OurAdapter(store), n, r, s, batch=batch)
            out["client_cpu_s"] = sum(me.cpu_times()[:2]) - cpu0
            out["server_cpu_s"] = (
                process_cpu_seconds(proc.pid) - server0 if proc is not None else float("nan")
            )
        finally:
            await store.close()
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
    span_ms = out.pop("span_ms")
    out["add_span_p99_ms"] = percentile(span_ms, 0.99)
    out["add_span_p50_ms"] = percentile(span_ms, 0.5)
    return out


def run_anchor(python: str, where: str, batch: bool, n: int, r: int, s: int) -> dict[str, Any]:
    script = Path(__file__).resolve().parent / "store_agl_side.py"
    cmd = [python, str(script), "--mode", where, "--n", str(n), "--r", str(r), "--s", str(s)]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": ""}
    done = subprocess.run(cmd + (["--batch"] if batch else []), capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"anchor side failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def spread(values: list[float], fmt: str = "{:.1f}") -> str:
    if not values:
        return "—"
    med = fmt.format(statistics.median(values))
    return med if len(values) == 1 else f"{med} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchor-python", help="python of a venv with agentlightning==0.3.0")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--r", type=int, default=32)
    parser.add_argument("--s", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    args = parser.parse_args()
    anchor = args.anchor_python
    why_no_anchor = None
    if not anchor:
        why_no_anchor = "no --anchor-python given"
    elif not Path(anchor).exists():
        why_no_anchor = f"--anchor-python {anchor} does not exist"
    if why_no_anchor:
        print(f"anchor column skipped: {why_no_anchor} (see the docstring to install agentlightning==0.3.0)")
    ours: dict[str, list[dict[str, Any]]] = {m: [] for m in args.modes}
    theirs: dict[str, list[dict[str, Any]]] = {m: [] for m in args.modes}
    for k in range(args.repeats):
        for mode in args.modes:
            _, where, batch = MODES[mode]
            if not why_no_anchor:
                theirs[mode].append(run_anchor(anchor, where, batch, args.n, args.r, args.s))
            ours[mode].append(asyncio.run(run_ours(where, batch, args.n, args.r, args.s)))
            their = f"{theirs[mode][-1]['rollouts_per_s']:.1f}" if theirs[mode] else "—"
            print(f"repeat {k + 1} {mode}: ours {ours[mode][-1]['rollouts_per_s']:.1f}, theirs {their} rollouts/s",
                  flush=True)  # fmt: skip

    print(f"\nN={args.n} R={args.r} S={args.s}, median of {args.repeats} (min–max), rollouts/s\n")
    print("| mode | Agent Lightning 0.3.0 | LightningRL | ratio |")
    print("|---|---|---|---|")
    for mode in args.modes:
        label = MODES[mode][0]
        mine = [x["rollouts_per_s"] for x in ours[mode]]
        anchor_rates = [x["rollouts_per_s"] for x in theirs[mode]]
        ratio = f"{statistics.median(mine) / statistics.median(anchor_rates):.1f}×" if anchor_rates else "—"
        print(f"| {label} | {spread(anchor_rates)} | {spread(mine)} | {ratio} |")
    if "inproc-single" in args.modes:
        mine = [x["add_span_p99_ms"] for x in ours["inproc-single"]]
        anchor_p99 = [x["add_span_p99_ms"] for x in theirs["inproc-single"]]
        print(
            f"| `add_span` p99 in process, ms | {spread(anchor_p99, '{:.2f}')} | {spread(mine, '{:.2f}')} | — |"
        )
    print(
        "\nCPU ms per rollout, client process / server process (median of repeats), and empty claims per rollout:"
    )
    for mode in args.modes:
        cells = []
        for name, runs in (("LightningRL", ours[mode]), ("Agent Lightning", theirs[mode])):
            client = spread([1000 * x["client_cpu_s"] / args.n for x in runs], "{:.2f}")
            server = spread([1000 * x.get("server_cpu_s", float("nan")) / args.n for x in runs], "{:.2f}")
            empty = spread([x["empty_claims"] / args.n for x in runs], "{:.1f}")
            cells.append(f"{name} {client} / {server}, {empty} empty claims")
        print(f"  {mode}: " + "; ".join(cells))


if __name__ == "__main__":
    main()
