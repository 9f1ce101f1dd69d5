"""Bench the rollout phase: the whole system's LLM calls/s vs the inference server alone.

    .venv/bin/python bench/rollouts.py [--rollouts 96] [--workers 32] [--repeats 3] [--model DIR]

The workload is one RL step of the calc demo: `--rollouts` rollouts of examples/calc's agent (two
chat calls each: pick a tool, then answer) at `--workers` concurrency, on the demo's warmed-up tiny
model (built and warmed here unless `--model` names one).

- **inference alone**: this process runs the agent's own `solve()` against `lightningrl serve-model`
  directly — the same requests at the same concurrency, no store, no proxy, no runner.
- **whole system**: the processes `fit` starts (`lightningrl store serve` with its proxy, the same
  inference server, `lightningrl runner` x `--runner-processes`); this process enqueues the rollouts
  as the trainer does and times enqueue -> every rollout finished (`wait_for_rollouts`), spans,
  rewards and attempt ends stored.

Each arm is warmed once, then timed `--repeats` times; the table shows the median and the range.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "calc"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from agent import solve  # noqa: E402
from tasks import demonstrations, split_tasks, vocabulary  # noqa: E402

from lightningrl.processes.supervisor import Supervisor, child_env, cli_command  # noqa: E402
from lightningstore import LLM, RolloutRequest, open_store  # noqa: E402
from lightningstore.auth import Role  # noqa: E402
from lightningstore.server.run import free_port  # noqa: E402
from runner.resources import ResolvedLLM  # noqa: E402

SAMPLING = {"temperature": 1.0, "top_p": 1.0}


class CpuMeter:
    """CPU seconds (user + system) each named process used between `start()` and `stop()`."""

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        self.processes: dict[str, object] = {"bench driver": psutil.Process()}
        self._before: dict[str, float] = {}
        self.used: dict[str, float] = {}

    def add(self, name: str, pid: int) -> None:
        self.processes[name] = self._psutil.Process(pid)

    def _now(self) -> dict[str, float]:
        return {name: sum(proc.cpu_times()[:2]) for name, proc in self.processes.items()}  # type: ignore[attr-defined]

    def start(self) -> None:
        self._before = self._now()

    def stop(self) -> dict[str, float]:
        now = self._now()
        self.used = {name: now[name] - self._before.get(name, 0.0) for name in now}
        return self.used


def warmed_model(work: Path, warmup_steps: int) -> Path:
    from lightningrl.demos.tinylm import build_tiny_model
    from lightningrl.demos.warmup import WarmupConfig, supervised_warmup

    train, _ = split_tasks(0)
    base = build_tiny_model(
        work / "model-base",
        seed=0,
        tokenizer_kind="word",
        extra_text=vocabulary(),
        hidden_size=128,
        num_layers=2,
    )
    warm, _ = supervised_warmup(
        base,
        demonstrations(train, 0, 4000),
        work / "model-warmup",
        WarmupConfig(steps=warmup_steps, lr=3e-3),
        show_progress=False,
    )
    return warm


def questions(count: int) -> list[dict]:
    train, _ = split_tasks(0)
    return [t.as_input() for t in (train * (count // len(train) + 1))[:count]]


async def alone(endpoint: str, tasks: list[dict], workers: int) -> float:
    """Seconds for the agent's calls of every task, `workers` at a time, straight to the server."""
    llm = ResolvedLLM(name="policy", base_url=endpoint, model="policy", api_key="bench", sampling=SAMPLING)
    queue: asyncio.Queue[dict] = asyncio.Queue()
    for task in tasks:
        queue.put_nowait(task)

    async def worker() -> None:
        while not queue.empty():
            task = queue.get_nowait()
            await solve(llm, task["question"])

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return time.perf_counter() - started


async def system(store, tasks: list[dict], resources_id: str) -> float:
    """Seconds from enqueueing the tasks as rollouts to all of them finished, as the trainer sees it."""
    requests = [
        RolloutRequest(input=t, resources_id=resources_id, metadata={"task_id": t["task_id"]}) for t in tasks
    ]
    started = time.perf_counter()
    enqueued = await store.enqueue_many_rollouts(requests)
    done = await store.wait_for_rollouts([r.rollout_id for r in enqueued], timeout=600)
    elapsed = time.perf_counter() - started
    failed = [r for r in done if r.status.value != "succeeded"]
    if len(done) != len(tasks) or failed:
        raise RuntimeError(f"{len(tasks) - len(done)} unfinished, {len(failed)} failed rollouts")
    return elapsed


async def batching(endpoint: str) -> dict[str, float]:
    """The inference server's batch counters (`GET /metrics`)."""
    import httpx

    async with httpx.AsyncClient() as client:
        data = (await client.get(endpoint.removesuffix("/v1") + "/metrics")).json()["batching"]
    return {key: float(data[key]) for key in ("batches", "requests", "busy_seconds")}


def batching_used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {key: after[key] - before[key] for key in before}


async def bench(
    args: argparse.Namespace, work: Path
) -> tuple[list[tuple[str, list[float]]], list[dict[str, float]], list[dict[str, float]]]:
    """Timings per arm, the CPU seconds per process and the inference server's batching in each arm's
    timed repeats."""
    model = Path(args.model) if args.model else warmed_model(work, args.warmup_steps)
    tasks = questions(args.rollouts)
    results: list[tuple[str, list[float]]] = []
    cpu: list[dict[str, float]] = []
    batches: list[dict[str, float]] = []
    meter = CpuMeter()
    with Supervisor(work / "logs") as supervisor:
        port = free_port()
        inference = supervisor.start(
            "inference",
            cli_command(
                "serve-model",
                "--checkpoint",
                str(model),
                "--port",
                str(port),
                "--served-model-name",
                "policy",
                "--max-batch-size",
                "64",
                "--cpu-threads",
                "1",
            ),
            env=child_env(),
        )
        await supervisor.wait_http(inference, f"http://127.0.0.1:{port}/healthz")
        meter.add("inference server", inference.pid)
        endpoint = f"http://127.0.0.1:{port}/v1"
        await alone(endpoint, tasks, args.workers)  # warm
        meter.start()
        counted = await batching(endpoint)
        results.append(
            ("inference alone", [await alone(endpoint, tasks, args.workers) for _ in range(args.repeats)])
        )
        cpu.append(meter.stop())
        batches.append(batching_used(counted, await batching(endpoint)))

        store_port = free_port()
        server = supervisor.start(
            "store",
            cli_command("store", "serve", "--db", str(work / "store.db"), "--port", str(store_port)),
            env=child_env(),
        )
        store_url = f"http://127.0.0.1:{store_port}"
        await supervisor.wait_http(server, f"{store_url}/healthz")
        meter.add("store server + proxy", server.pid)
        store = open_store(store_url, role=Role.ALGORITHM)
        try:
            llm = LLM(endpoints=[endpoint], model="policy", checkpoint=str(model), sampling=SAMPLING)
            version = await store.add_resource_version("policy", llm, created_by="bench")
            resources = await store.add_resource_set({"policy": version.version_id})
            share, extra = divmod(args.workers, args.runner_processes)
            for index in range(args.runner_processes):
                runner = supervisor.start(
                    f"runner-{index}",
                    cli_command(
                        "runner",
                        "--store",
                        store_url,
                        "--proxy-url",
                        f"{store_url}/proxy",
                        "--workers",
                        str(share + (index < extra)),
                        "--no-progress",
                        "--agent",
                        "agent:calc_agent",
                    ),
                    env=child_env(),
                )
                meter.add(f"runner {index}", runner.pid)
            await system(store, tasks, resources.resources_id)  # warm (and waits for the runners to attach)
            meter.start()
            counted = await batching(endpoint)
            timed = [await system(store, tasks, resources.resources_id) for _ in range(args.repeats)]
            cpu.append(meter.stop())
            batches.append(batching_used(counted, await batching(endpoint)))
            results.append((f"whole system ({args.runner_processes} runner processes)", timed))
        finally:
            await store.close()
    return results, cpu, batches


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rollouts", type=int, default=96)
    p.add_argument("--workers", type=int, default=32)
    p.add_argument("--runner-processes", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--model", default=None, help="a warmed-up calc model directory (default: build one)")
    p.add_argument("--warmup-steps", type=int, default=300)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-rollouts-") as tmp:
        results, cpu, batches = asyncio.run(bench(args, Path(tmp)))
    calls = 2 * args.rollouts
    base = statistics.median(results[0][1])
    print(
        f"\nrollout phase: {args.rollouts} calc rollouts ({calls} chat calls) at concurrency {args.workers}, "
        f"median of {args.repeats} (range)"
    )
    print(
        f"{'arm':42s} {'seconds':>18s} {'calls/s':>8s} {'vs alone':>9s} {'calls/batch':>12s} {'model busy':>11s}"
    )
    for (name, times), counted in zip(results, batches, strict=True):
        med = statistics.median(times)
        spread = f"{med:.2f} ({min(times):.2f}-{max(times):.2f})"
        per_batch = counted["requests"] / max(counted["batches"], 1)
        busy = counted["busy_seconds"] / sum(times)
        print(f"{name:42s} {spread:>18s} {calls / med:8.1f} {base / med:9.0%} {per_batch:12.1f} {busy:11.0%}")

    print(f"\nCPU per rollout (ms, all processes' user + system, over the {args.repeats} timed repeats)")
    names = list(cpu[-1])
    print(f"{'arm':42s} " + " ".join(f"{n:>20s}" for n in names) + f" {'total':>8s}")
    for (name, _), used in zip(results, cpu, strict=True):
        per = {n: 1000 * used.get(n, 0.0) / (args.rollouts * args.repeats) for n in names}
        cells = " ".join(f"{per[n]:20.1f}" if n in used else f"{'-':>20s}" for n in names)
        print(f"{name:42s} {cells} {sum(per.values()):8.1f}")


if __name__ == "__main__":
    main()
