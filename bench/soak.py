"""Memory soak of the store: a real server on SQLite under a steady load, RSS of every process over time.

    nice -n 10 .venv/bin/python bench/soak.py --minutes 30 --rate 10 --runners 3
    nice -n 10 .venv/bin/python bench/soak.py --minutes 1 --warmup-minutes 0.25   # smoke
    .venv/bin/python bench/soak.py --from-csv bench/soak_out/rss.csv --title "..."  # table + plot again

Starts `python -m lightningstore.server` on a SQLite file (127.0.0.1), one algorithm process and
`--runners` runner processes, each a StoreClient:

- algorithm: every second enqueues `--rate` rollouts (skipped while more than `--backlog` are still
  open), reads the open ones' status (query_rollouts by id) and, for the finished ones, their spans
  and rewards (query_spans_many, query_rewards_many) and the store statistics;
- runner: dequeue -> add_many_spans(S-1 spans of ~2 KB text + ~200 token ids) -> add_reward (a step
  reward) -> finish_attempt(the last span + the episode reward).

Every `--sample` seconds the RSS of each process (server and its children, every client, this
parent) goes into `<out>/rss.csv`. At the end: a table per process (RSS at the end of warm-up, at
the end, growth, MiB/hour of a least-squares line over the post-warm-up samples), `<out>/rss.png`,
and the counts of rollouts done.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from store_http import _free_port, start_server  # noqa: E402
from workload import make_spans  # noqa: E402

from lightningstore import RewardIn, RolloutRequest  # noqa: E402
from lightningstore.client.store_client import StoreClient  # noqa: E402

MIB = 1024 * 1024


async def run_runner(url: str, k: int, until: float, spans_per_rollout: int) -> dict[str, int]:
    """Claim and finish rollouts until the wall clock passes `until`; sleep briefly when the queue is empty."""
    rng = random.Random(k)
    done = 0
    idle = 0
    async with StoreClient(url, max_connections=4) as client:
        while time.time() < until:
            claimed = await client.dequeue_rollout(f"soak-runner-{k}")
            if claimed is None:
                idle += 1
                await asyncio.sleep(0.05)
                continue
            spans = make_spans(claimed.rollout_id, claimed.attempt_id, spans_per_rollout, rng)
            await client.add_many_spans(spans[:-1])
            await client.add_reward(
                RewardIn(
                    rollout_id=claimed.rollout_id,
                    attempt_id=claimed.attempt_id,
                    name="step",
                    value=rng.random(),
                    step=0,
                    primary=False,
                )
            )
            await client.finish_attempt(
                claimed.rollout_id,
                claimed.attempt_id,
                status="succeeded",
                spans=spans[-1:],
                rewards=[RewardIn(rollout_id=claimed.rollout_id, value=rng.random())],
            )
            done += 1
    return {"done": done, "idle_polls": idle}


async def run_algorithm(url: str, until: float, rate: int, backlog: int) -> dict[str, int]:
    """Enqueue `rate` rollouts a second (bounded backlog) and read back every finished one."""
    enqueued = 0
    read = 0
    spans_read = 0
    open_ids: list[str] = []
    async with StoreClient(url, max_connections=4) as client:
        tick = time.time()
        while time.time() < until:
            if len(open_ids) <= backlog:
                batch = await client.enqueue_many_rollouts(
                    [RolloutRequest(input={"i": enqueued + i}) for i in range(rate)]
                )
                open_ids.extend(r.rollout_id for r in batch)
                enqueued += len(batch)
            if open_ids:
                rows = await client.query_rollouts(rollout_ids=open_ids, limit=len(open_ids))
                finished = [r.rollout_id for r in rows if r.status in ("succeeded", "failed")]
                if finished:
                    spans = await client.query_spans_many(finished)
                    await client.query_rewards_many(finished)
                    spans_read += sum(len(v) for v in spans.values())
                    read += len(finished)
                    gone = set(finished)
                    open_ids = [i for i in open_ids if i not in gone]
            await client.statistics()
            tick += 1.0
            await asyncio.sleep(max(0.0, tick - time.time()))
    return {"enqueued": enqueued, "read": read, "spans_read": spans_read, "open_at_end": len(open_ids)}


@dataclass
class Sample:
    t: float
    name: str
    pid: int
    rss_mib: float


@dataclass
class Series:
    name: str
    t: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)


def _rss_mib(pid: int) -> float | None:
    try:
        return psutil.Process(pid).memory_info().rss / MIB
    except psutil.Error:
        return None


def sample_all(t: float, named: dict[str, int], server_pid: int) -> list[Sample]:
    """RSS of every named process plus the server's child processes (if it has any)."""
    out: list[Sample] = []
    pids = dict(named)
    try:
        for i, child in enumerate(psutil.Process(server_pid).children(recursive=True)):
            pids[f"server-child-{i}"] = child.pid
    except psutil.Error:
        pass
    for name, pid in pids.items():
        rss = _rss_mib(pid)
        if rss is not None:
            out.append(Sample(t, name, pid, rss))
    return out


def slope_per_hour(t: list[float], y: list[float]) -> float:
    """Least-squares slope of y (MiB) over t (s), in MiB per hour."""
    n = len(t)
    if n < 2:
        return float("nan")
    mt, my = sum(t) / n, sum(y) / n
    var = sum((a - mt) ** 2 for a in t)
    if var == 0:
        return float("nan")
    return sum((a - mt) * (b - my) for a, b in zip(t, y, strict=True)) / var * 3600


def table(series: dict[str, Series], warmup_s: float) -> str:
    lines = [
        "| process | RSS at warm-up end (MiB) | RSS at end (MiB) | growth (MiB) | fit (MiB/hour) | min..max after warm-up (MiB) |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in series.items():
        post = [(a, b) for a, b in zip(s.t, s.rss, strict=True) if a >= warmup_s]
        if not post:
            continue
        ts, ys = [a for a, _ in post], [b for _, b in post]
        lines.append(
            f"| {name} | {ys[0]:.1f} | {ys[-1]:.1f} | {ys[-1] - ys[0]:+.1f} | "
            f"{slope_per_hour(ts, ys):+.1f} | {min(ys):.1f}..{max(ys):.1f} |"
        )
    return "\n".join(lines)


def plot(series: dict[str, Series], warmup_s: float, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=80)
    for name, s in series.items():
        ax.plot([a / 60 for a in s.t], s.rss, label=name, linewidth=1.2)
    ax.axvline(warmup_s / 60, color="grey", linestyle="--", linewidth=0.8, label="warm-up end")
    ax.set_xlabel("minutes")
    ax.set_ylabel("RSS (MiB)")
    ax.set_title(textwrap.fill(title, 100), fontsize=9)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def read_csv(path: Path) -> dict[str, Series]:
    """The series of an rss.csv that `run_soak` wrote."""
    series: dict[str, Series] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            entry = series.setdefault(row["process"], Series(row["process"]))
            entry.t.append(float(row["t_s"]))
            entry.rss.append(float(row["rss_mib"]))
    return series


def spawn_client(
    role: str, url: str, until: float, args: argparse.Namespace, k: int = 0
) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, __file__, "--role", role, "--url", url, "--until", str(until), "--k", str(k)]
    cmd += ["--rate", str(args.rate), "--backlog", str(args.backlog), "--s", str(args.s)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE)


def run_soak(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    duration = args.minutes * 60
    warmup_s = args.warmup_minutes * 60
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "soak.db"
        port = _free_port()
        server = start_server(db, port)
        url = f"http://127.0.0.1:{port}"
        t0 = time.time()
        until = t0 + duration
        clients = {"algorithm": spawn_client("algorithm", url, until, args)}
        for k in range(args.runners):
            clients[f"runner-{k}"] = spawn_client("runner", url, until, args, k)
        named = {
            "server": server.pid,
            **{n: p.pid for n, p in clients.items()},
            "soak-parent": psutil.Process().pid,
        }
        series: dict[str, Series] = {}
        try:
            with (out / "rss.csv").open("w", newline="") as fh:
                writer = csv.writer(fh)
                writer.writerow(["t_s", "process", "pid", "rss_mib"])
                next_at = t0
                while time.time() < until + 1:
                    for s in sample_all(time.time() - t0, named, server.pid):
                        writer.writerow([f"{s.t:.1f}", s.name, s.pid, f"{s.rss_mib:.2f}"])
                        entry = series.setdefault(s.name, Series(s.name))
                        entry.t.append(s.t)
                        entry.rss.append(s.rss_mib)
                    fh.flush()
                    if server.poll() is not None:
                        raise RuntimeError(f"server exited with {server.returncode}")
                    next_at += args.sample
                    time.sleep(max(0.0, min(next_at, until + 1) - time.time()))
            results = {}
            for name, proc in clients.items():
                stdout, _ = proc.communicate(timeout=120)
                if proc.returncode != 0:
                    raise RuntimeError(f"{name} exited with {proc.returncode}")
                results[name] = json.loads(stdout.decode().strip().splitlines()[-1])
            db_mib = sum(p.stat().st_size for p in Path(tmp).glob("soak.db*")) / MIB
        finally:
            for proc in clients.values():
                if proc.poll() is None:
                    proc.kill()
            server.terminate()
            server.wait(timeout=30)
    done = sum(r.get("done", 0) for r in results.values())
    summary = (
        f"soak {args.minutes:g} min, rate {args.rate}/s, {args.runners} runners, S={args.s}, "
        f"sample every {args.sample:g} s, warm-up {args.warmup_minutes:g} min: {done} rollouts done "
        f"({done / duration:.2f}/s), db {db_mib:.0f} MiB"
    )
    print(summary)
    print(json.dumps(results))
    print(table(series, warmup_s))
    plot(series, warmup_s, out / "rss.png", summary)
    print(f"csv {out / 'rss.csv'}, plot {out / 'rss.png'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--warmup-minutes", type=float, default=5.0)
    parser.add_argument("--rate", type=int, default=10, help="rollouts enqueued per second")
    parser.add_argument("--backlog", type=int, default=100, help="no enqueue while more are open")
    parser.add_argument("--runners", type=int, default=3)
    parser.add_argument("--s", type=int, default=6, help="spans per rollout")
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between RSS samples")
    parser.add_argument("--out", default="bench/soak_out")
    parser.add_argument("--from-csv", default="", help="only print the table and plot of this rss.csv")
    parser.add_argument("--title", default="", help="with --from-csv: the plot's title")
    parser.add_argument("--role", choices=["soak", "runner", "algorithm"], default="soak")
    parser.add_argument("--url", default="")
    parser.add_argument("--until", type=float, default=0.0)
    parser.add_argument("--k", type=int, default=0)
    args = parser.parse_args()
    if args.minutes <= 0 or args.rate < 1 or args.runners < 1 or args.s < 2 or args.sample <= 0:
        raise SystemExit(
            f"need minutes > 0, rate >= 1, runners >= 1, s >= 2, sample > 0; got minutes={args.minutes} "
            f"rate={args.rate} runners={args.runners} s={args.s} sample={args.sample}"
        )
    if args.from_csv:
        series = read_csv(Path(args.from_csv))
        print(table(series, args.warmup_minutes * 60))
        png = Path(args.out) / "rss.png"
        png.parent.mkdir(parents=True, exist_ok=True)
        plot(series, args.warmup_minutes * 60, png, args.title or args.from_csv)
        print(f"plot {png}")
    elif args.role == "runner":
        print(json.dumps(asyncio.run(run_runner(args.url, args.k, args.until, args.s))))
    elif args.role == "algorithm":
        print(json.dumps(asyncio.run(run_algorithm(args.url, args.until, args.rate, args.backlog))))
    else:
        run_soak(args)


if __name__ == "__main__":
    main()
