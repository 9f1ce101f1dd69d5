"""Bench the model gateway: added latency per call, and inference throughput vs bare `model.generate`.

    .venv/bin/python bench/gateway.py [--calls 400] [--max-tokens 64] [--threads 1] [--skip-throughput]

Everything runs on loopback, each server in its own process (so the client, the gateway and the
backend do not share a GIL). The overhead is measured against a stub OpenAI backend that answers at
once with fixed token ids, so that model time does not hide the gateway's own cost; the gateway
stores one LLM span per call (SQLite file) before answering, as in production.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

from lightningstore.server.run import free_port

STUB_TOKEN_IDS = list(range(100, 116))
CHAT = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 12 plus 7?"}]


# ---- the servers (each run as `bench/gateway.py --serve ROLE ...` in its own process) ----------


def stub_app() -> FastAPI:
    """A stub OpenAI backend: a fixed answer with fixed token ids and logprobs, no model."""
    app = FastAPI()
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": "stub " * len(STUB_TOKEN_IDS)},
        "logprobs": {"content": [{"token": "stub", "logprob": -0.25, "bytes": [], "top_logprobs": []}] * 16},
        "finish_reason": "length",
        "token_ids": STUB_TOKEN_IDS,
    }
    usage = {"prompt_tokens": 12, "completion_tokens": 16, "total_tokens": 28}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = orjson.loads(await request.body())
        answer = {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "stub"),
            "choices": [choice],
            "usage": usage,
            "prompt_token_ids": list(range(12)),
        }
        return Response(orjson.dumps(answer), media_type="application/json")

    return app


def serve(role: str, port: int, path: str | None, threads: int) -> None:
    """Run one server until killed."""
    import uvicorn

    if role == "stub":
        app = stub_app()
    elif role == "gateway":
        from lightningstore import SqlStore
        from lightningstore.server import build_app

        app = build_app(SqlStore(path), sweep_interval=None)
    else:
        from lightningrl.serving import create_app as create_inference_app

        app = create_inference_app(
            path, device="cpu", max_batch_size=16, batch_wait_ms=2, cpu_threads=threads
        )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def spawn(role: str, path: str | None = None, threads: int = 1) -> tuple[subprocess.Popen[bytes], str]:
    """Start a server process and return it with its base URL once it answers."""
    port = free_port()
    command = [sys.executable, __file__, "--serve", role, "--port", str(port), "--threads", str(threads)]
    if path:
        command += ["--path", path]
    process = subprocess.Popen(command, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the {role} server exited with {process.returncode}")
        try:
            httpx.get(f"{url}/docs", timeout=1)
            return process, url
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the {role} server did not start")


# ---- measurements ----------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def overhead(stub_url: str, proxy_base: str, calls: int) -> dict[str, list[float]]:
    """Per-call latency (ms) direct to the stub and through the gateway, interleaved, after a warm-up."""
    body = {"model": "stub", "messages": CHAT, "max_tokens": 16}
    timings: dict[str, list[float]] = {"direct": [], "gateway": []}
    targets = {"direct": f"{stub_url}/v1/chat/completions", "gateway": f"{proxy_base}/chat/completions"}
    async with httpx.AsyncClient() as http:
        for index in range(calls + 50):
            for name, url in targets.items():
                started = time.perf_counter()
                response = await http.post(url, json=body)
                elapsed = (time.perf_counter() - started) * 1e3
                response.raise_for_status()
                if index >= 50:
                    timings[name].append(elapsed)
    return timings


async def server_throughput(base: str, concurrency: int, requests: int, max_tokens: int) -> float:
    """Generated tokens per second of `requests` chat calls, `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)
    body = {"model": "tiny", "messages": CHAT, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}

    async def one(http: httpx.AsyncClient) -> int:
        async with gate:
            response = await http.post(f"{base}/chat/completions", json=body, timeout=300)
            response.raise_for_status()
            return response.json()["usage"]["completion_tokens"]

    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=64)) as http:
        await one(http)  # warm-up
        started = time.perf_counter()
        tokens = sum(await asyncio.gather(*(one(http) for _ in range(requests))))
    return tokens / (time.perf_counter() - started)


def generate_throughput(model_dir: Path, batch: int, rounds: int, max_tokens: int, threads: int) -> float:
    """Generated tokens per second of bare `model.generate` (greedy, fixed length) on `batch` prompts."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ids = tokenizer.apply_chat_template(CHAT, add_generation_prompt=True, return_dict=False)
    inputs = torch.tensor([ids] * batch)
    kwargs = {"max_new_tokens": max_tokens, "min_new_tokens": max_tokens, "do_sample": False}
    with torch.inference_mode():
        model.generate(inputs, attention_mask=torch.ones_like(inputs), **kwargs)  # warm-up
        started = time.perf_counter()
        for _ in range(rounds):
            out = model.generate(inputs, attention_mask=torch.ones_like(inputs), **kwargs)
    generated = (out.shape[1] - inputs.shape[1]) * batch * rounds
    return generated / (time.perf_counter() - started)


# ---- the run ---------------------------------------------------------------------------------


async def prepare_store(db: Path, endpoints: dict[str, str]) -> dict[str, str]:
    """One rollout per backend, each bound to an LLM resource on it; returns name -> proxy path."""
    from lightningstore import LLM, SqlStore

    store = SqlStore(db)
    paths = {}
    for name, endpoint in endpoints.items():
        resources = await store.add_resources({"llm": LLM(endpoints=[endpoint], model=name)})
        claimed = await store.start_rollout({"bench": name}, resources_id=resources.resources_id)
        paths[name] = f"/proxy/rollout/{claimed.rollout_id}/attempt/{claimed.attempt_id}/mode/train/v1"
    await store.close()
    return paths


def run(args: argparse.Namespace) -> None:
    from rich.console import Console
    from rich.table import Table

    from lightningrl.demos.tinylm import build_tiny_model

    processes: list[subprocess.Popen[bytes]] = []
    console = Console()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            stub, stub_url = spawn("stub")
            processes.append(stub)
            backends = {"stub": f"{stub_url}/v1"}
            if not args.skip_throughput:
                model_dir = build_tiny_model(Path(tmp) / "model", seed=0)
                server, server_url = spawn("inference", str(model_dir), args.threads)
                processes.append(server)
                backends["tiny"] = f"{server_url}/v1"
            db = Path(tmp) / "store.db"
            paths = asyncio.run(prepare_store(db, backends))
            gateway, gateway_url = spawn("gateway", str(db))
            processes.append(gateway)

            console.print(f"[bold]Overhead[/]: {args.calls} sequential chat calls each way (stub backend)")
            timings = asyncio.run(overhead(stub_url, gateway_url + paths["stub"], args.calls))
            table = Table(title="Gateway latency per call, ms (loopback, stub OpenAI backend)")
            for column in ("path", "p50", "p90", "p99", "mean"):
                table.add_column(column, justify="right" if column != "path" else "left")
            for name, values in timings.items():
                label = "direct to stub" if name == "direct" else "through gateway (+ span stored)"
                row = [percentile(values, q) for q in (0.5, 0.9, 0.99)] + [statistics.fmean(values)]
                table.add_row(label, *(f"{v:.3f}" for v in row))
            added = [
                percentile(timings["gateway"], q) - percentile(timings["direct"], q) for q in (0.5, 0.9, 0.99)
            ]
            mean_added = statistics.fmean(timings["gateway"]) - statistics.fmean(timings["direct"])
            table.add_row("[bold]added by the gateway[/]", *(f"{v:.3f}" for v in (*added, mean_added)))
            console.print(table)
            if args.skip_throughput:
                return

            console.print(
                f"[bold]Throughput[/]: {args.max_tokens} greedy tokens per request, {args.threads} torch thread(s)"
            )
            rows = [
                (
                    "inference server, 1 concurrent",
                    server_throughput(server_url + "/v1", 1, 6, args.max_tokens),
                ),
                (
                    "inference server, 16 concurrent",
                    server_throughput(server_url + "/v1", 16, 32, args.max_tokens),
                ),
                (
                    "via gateway, 16 concurrent",
                    server_throughput(gateway_url + paths["tiny"], 16, 32, args.max_tokens),
                ),
            ]
            results = [(label, asyncio.run(coroutine)) for label, coroutine in rows]
            for stopped in (stub, gateway):
                stopped.terminate()
            server.terminate()
            server.wait(30)
            results += [
                (
                    "bare model.generate, batch 1",
                    generate_throughput(model_dir, 1, 6, args.max_tokens, args.threads),
                ),
                (
                    "bare model.generate, batch 16",
                    generate_throughput(model_dir, 16, 2, args.max_tokens, args.threads),
                ),
            ]
            table = Table(title="Inference throughput (tiny Qwen2: hidden 128, 2 layers), CPU")
            table.add_column("what")
            table.add_column("tokens/s", justify="right")
            for label, value in results:
                table.add_row(label, f"{value:,.0f}")
            console.print(table)
        finally:
            for process in processes:
                if process.poll() is None:
                    process.terminate()
                    process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="measured calls each way (after 50 warm-up)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for the server and generate")
    parser.add_argument("--skip-throughput", action="store_true", help="measure the overhead only")
    parser.add_argument("--serve", choices=("stub", "gateway", "inference"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.path, args.threads)
    else:
        run(args)


if __name__ == "__main__":
    main()
