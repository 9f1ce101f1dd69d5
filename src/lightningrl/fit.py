"""`fit`: train an agent in one call. It starts what is missing as separate processes (store server,
inference server, runners), runs the RL loop here against the store server, and stops them all.

Layout and lifecycle: docs/deployment.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from rich.console import Console

from lightningrl.agent_spec import AgentSpec, agent_spec
from lightningrl.config import LightningRLConfig
from lightningrl.config_fields import config_from
from lightningrl.datasets import Rows, load_tasks
from lightningrl.loop import LightningRL
from lightningrl.processes import Supervisor, child_env, cli_command, free_port, port_is_free
from lightningrl.result import TrainResult
from lightningrl.serving.vllm import (
    check_reloadable,
    has_cuda,
    resolve_engine,
    vllm_command,
    vllm_env,
    vllm_python,
)
from lightningstore import LLM, LightningStore, open_store, semconv
from lightningstore.auth import Role

ENGINES = ("auto", "ours", "vllm")
SERVED_MODEL_NAME = "policy"
VLLM_START_TIMEOUT = 600.0
"""vLLM-CPU starts in 20-85 s on an idle 2-core machine (a compile on first start), slower when busy."""
INFERENCE_BATCH = 64
"""Most requests the inference server generates together (a step's rollouts arrive at once)."""
DETERMINISTIC_BATCH = 1
"""`deterministic` runs generate one sequence at a time: a row's logits then never depend on which
other requests shared its batch (batched float math differs in the last bits, and a seeded draw that
lands in the long tail of the distribution picks another token for a 1e-6 shift)."""
TRAIN_SAMPLING = {"temperature": 1.0, "top_p": 1.0}
T = TypeVar("T")
"""The train mode samples from the model's own distribution: the trainer's log-probs assume it."""


def fit(
    agent: Any,
    train: Rows,
    val: Rows | None = None,
    *,
    model: str | Path,
    config: LightningRLConfig | Mapping[str, Any] | None = None,
    store: str | Path | None = None,
    workers: int = 8,
    engine: str = "auto",
    vllm_python: str | Path | None = None,
    output_dir: str | Path = "runs/fit",
    runner_processes: int | None = None,
    sampling_by_mode: Mapping[str, Mapping[str, Any]] | None = None,
    console: Console | None = None,
) -> TrainResult:
    """Train `agent` on `train` (held-out `val`) starting from the checkpoint `model`.

    - agent: a `@rollout` function, a LitAgent class or top-level instance, `"module:function"`,
      `"path/to/script.py:function"`, or a command line (a list, or any other str) run per rollout.
    - train / val: a list of dicts, a JSONL path or an iterable of dicts (see `lightningrl.datasets`).
    - config: a LightningRLConfig or a dict of its fields; its `output_dir` is set to `output_dir`.
      `{"trainer": {"backend": "ray", "num_workers": 4}}` trains on 4 Ray ranks (docs/scaling.md).
    - store: None (`output_dir/store.db`), a SQLite path, a `postgresql://` URL, or the URL of a
      running store server (`http(s)://`; then no store server is started).
    - workers: concurrent rollouts in all, split over `runner_processes` processes
      (default `min(workers, os.cpu_count())`).
    - engine: "ours" (our inference server), "vllm" (vLLM's own server, from `vllm_python` or
      $LIGHTNINGRL_VLLM_PYTHON or `.venv-vllm`: see docs/serving.md; the model must not tie its
      output head to its embeddings) or "auto" (vllm when it is installed and a GPU is present).
    - sampling_by_mode: the published LLM's per-mode sampling (e.g. `{"val": {"temperature": 1.0}}`
      to measure held-out success at the training temperature; default: val 0.7, test greedy).

    Works inside a running event loop too (a Jupyter cell): training then runs on a thread of its own.
    A second call on the same output_dir and store resumes: it trains the resource's latest version
    and continues the metrics and step numbers. Children stop on return, error, Ctrl-C and SIGTERM.
    """
    spec = agent_spec(agent)
    out = Path(output_dir)
    cfg = dataclasses.replace(config_from(config), output_dir=out)
    tag_fields = [cfg.balance_by] if cfg.balance_by else []
    train_tasks = load_tasks(train, what="train", tag_fields=tag_fields)
    if not train_tasks:
        raise ValueError("train has no rows: give at least one task")
    val_tasks = load_tasks(val, what="val", tag_fields=tag_fields) if val is not None else []
    model_dir = Path(model)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(
            f"model {str(model)!r} is not a Hugging Face checkpoint directory (no config.json)"
        )
    engine = resolve_engine(engine, vllm_python)
    if engine == "vllm":
        check_reloadable(model_dir)
        if cfg.trainer.lora_rank > 0:
            raise ValueError(
                "engine='vllm' with trainer.lora_rank > 0 is not wired in fit yet: start vLLM with "
                "`lightningrl serve-model --engine vllm --lora-rank R`, publish an LLM whose model is the "
                "adapter's name, and pass that store (docs/serving.md); or use engine='ours'"
            )
    server = InferenceEngine(engine, vllm_python=str(vllm_python) if vllm_python else None)
    cfg = dataclasses.replace(cfg, engine=engine)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    processes = runner_processes or min(workers, os.cpu_count() or 1)
    if not 1 <= processes <= workers:
        raise ValueError(
            f"runner_processes must be between 1 and workers ({workers}), got {runner_processes!r}"
        )
    target = _store_target(store, out)
    console = console or Console()
    with Supervisor(out / "logs") as supervisor, _sigterm_as_interrupt():
        return _run_to_end(
            lambda: _fit(
                supervisor,
                spec,
                train_tasks,
                val_tasks,
                cfg,
                model_dir=model_dir.resolve(),
                server=server,
                target=target,
                workers=workers,
                processes=processes,
                console=console,
                sampling_by_mode={k: dict(v) for k, v in (sampling_by_mode or {}).items()},
            )
        )


async def _fit(
    supervisor: Supervisor,
    spec: AgentSpec,
    train_tasks: list,
    val_tasks: list,
    cfg: LightningRLConfig,
    *,
    model_dir: Path,
    server: InferenceEngine,
    target: str,
    workers: int,
    processes: int,
    console: Console,
    sampling_by_mode: dict[str, dict[str, Any]],
) -> TrainResult:
    store_url = await _store_server(supervisor, target, (cfg.output_dir / "metrics.csv").resolve())
    proxy_url = store_url.rstrip("/") + semconv.PROXY_PREFIX
    store = open_store(store_url, role=Role.ALGORITHM)
    rl: LightningRL | None = None
    try:
        llm = await _llm_resource(
            supervisor,
            store,
            cfg.resource_name,
            model_dir,
            sampling_by_mode,
            deterministic=cfg.deterministic,
            server=server,
        )
        _start_runners(supervisor, spec, store_url, proxy_url, workers, processes)
        if cfg.show_progress:
            console.print(
                f"store {store_url}  model {', '.join(llm.endpoints)}  "
                f"{processes} runner process(es) x {workers} rollouts  logs {supervisor.log_dir}",
                markup=False,
                highlight=False,
            )
        rl = LightningRL(store, train_tasks, val_tasks, cfg, console=console)
        rl.resume()
        training = asyncio.create_task(rl.run())
        watching = asyncio.create_task(supervisor.watch())
        try:
            await asyncio.wait({training, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (watching, training):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if watching.done() and not watching.cancelled() and watching.exception() is not None:
            raise watching.exception()  # type: ignore[misc]
        metrics = training.result()
        latest = await store.get_latest_version(cfg.resource_name)
        assert latest is not None
        checkpoint = getattr(latest.resource, "checkpoint", None)
        held = [(int(r["step"]), float(r["val/success"])) for r in metrics.rows if "val/success" in r]
        before = next((v for s, v in held if s == 0), None)
        after = next((v for s, v in reversed(held) if s > 0), None)
        curve = cfg.output_dir / "reward_curve.png"
        return TrainResult(
            metrics=list(metrics.rows),
            final_version_id=latest.version_id,
            held_out_before=before,
            held_out_after=after,
            metrics_csv=cfg.output_dir / "metrics.csv",
            reward_curve=curve if curve.exists() else None,
            last_checkpoint=Path(checkpoint) if checkpoint else None,
            output_dir=cfg.output_dir,
            store=store_url,
            proxy_url=proxy_url,
            model_endpoints=list(getattr(latest.resource, "endpoints", [])),
            stopped_reason=rl.stopped_reason,
        )
    finally:
        # A Ray trainer's ranks are processes of their own: stop them with the rest.
        close = getattr(rl.trainer if rl is not None else None, "close", None)
        if close is not None:
            await asyncio.to_thread(close)
        await store.close()


def _run_to_end(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`asyncio.run(main())`; inside a running event loop (Jupyter, an `async def`) on a thread of its
    own, since that loop cannot be re-entered. Ctrl-C there cancels the training like it does here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    box: dict[str, Any] = {}
    started = threading.Event()

    async def tracked() -> T:
        box["loop"], box["task"] = asyncio.get_running_loop(), asyncio.current_task()
        started.set()
        return await main()

    def target() -> None:
        try:
            box["value"] = asyncio.run(tracked())
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = error
        finally:
            started.set()

    thread = threading.Thread(target=target, name="lightningrl-fit", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.2)
    except KeyboardInterrupt:
        started.wait()
        if "loop" in box:
            box["loop"].call_soon_threadsafe(box["task"].cancel)
        thread.join()
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


def _store_target(store: str | Path | None, output_dir: Path) -> str:
    """The store as a URL or a database path (None: a SQLite file under `output_dir`)."""
    if store is None:
        output_dir.mkdir(parents=True, exist_ok=True)
        return str((output_dir / "store.db").resolve())
    text = str(store)
    if "://" in text and not text.startswith(("http://", "https://", "postgresql", "sqlite")):
        raise ValueError(f"store must be a file path, a postgresql:// URL or an http(s):// URL, got {text!r}")
    if "://" not in text:
        Path(text).parent.mkdir(parents=True, exist_ok=True)
        return str(Path(text).resolve())
    return text


async def _store_server(supervisor: Supervisor, target: str, metrics_csv: Path) -> str:
    """The store server's URL: `target` itself when it is one, else a `lightningrl store serve` child
    (its dashboard's training page charts `metrics_csv`)."""
    if target.startswith(("http://", "https://")):
        return target.rstrip("/")
    port = free_port()
    command = cli_command(
        "store", "serve", "--db", target, "--port", str(port), "--metrics-csv", str(metrics_csv)
    )
    child = supervisor.start("store", command, env=child_env())
    url = f"http://127.0.0.1:{port}"
    await supervisor.wait_http(child, f"{url}/healthz")
    return url


async def _answers(endpoint: str) -> bool:
    """True when an OpenAI-style endpoint lists its models."""
    try:
        async with httpx.AsyncClient(timeout=3.0) as client:
            return (await client.get(endpoint.rstrip("/") + "/models")).is_success
    except httpx.HTTPError:
        return False


async def _llm_resource(
    supervisor: Supervisor,
    store: LightningStore,
    name: str,
    model_dir: Path,
    sampling_by_mode: dict[str, dict[str, Any]],
    *,
    deterministic: bool = False,
    server: InferenceEngine | None = None,
) -> LLM:
    """The LLM being trained, served: a fresh resource on `model_dir`, or the latest version (resume),
    with an inference server started unless its endpoints already answer."""
    batch = DETERMINISTIC_BATCH if deterministic else INFERENCE_BATCH
    latest = await store.get_latest_version(name)
    if latest is None:
        endpoint = await _inference_server(
            supervisor, str(model_dir), SERVED_MODEL_NAME, free_port(), server, batch=batch
        )
        llm = LLM(
            endpoints=[endpoint],
            model=SERVED_MODEL_NAME,
            checkpoint=str(model_dir),
            sampling=TRAIN_SAMPLING,
            sampling_by_mode=sampling_by_mode,
            seed_calls=deterministic,
        )
        await store.add_resource_version(name, llm, created_by="fit", artifact=str(model_dir))
        return llm
    llm = latest.resource
    if not isinstance(llm, LLM) or not llm.checkpoint:
        raise ValueError(
            f"resource {name!r} in the store must be an LLM with a checkpoint to train, got {llm!r}"
        )
    if all([await _answers(e) for e in llm.endpoints]):
        return llm
    port = _local_port(llm.endpoints)
    endpoint = await _inference_server(
        supervisor,
        llm.checkpoint,
        llm.model,
        port if port and port_is_free(port) else free_port(),
        server,
        batch=batch,
    )
    if llm.endpoints == [endpoint]:
        return llm
    # The old server is gone and its port is taken: a version that only moves the endpoint.
    moved = llm.model_copy(update={"endpoints": [endpoint]})
    await store.add_resource_version(
        name,
        moved,
        parent_id=latest.version_id,
        created_by="fit",
        artifact=llm.checkpoint,
        metadata={"fit": "endpoints moved", "previous_endpoints": llm.endpoints},
    )
    return moved


def _local_port(endpoints: list[str]) -> int | None:
    """The port of a single 127.0.0.1 endpoint (a previous fit's server, to be restarted there)."""
    if len(endpoints) != 1:
        return None
    parts = urlsplit(endpoints[0])
    return parts.port if parts.hostname in ("127.0.0.1", "localhost") else None


def _cpu_threads_args() -> list[str]:
    """On a CPU-only machine generation gets one thread: the trainer and the runners need the others."""
    import torch

    return [] if torch.cuda.is_available() else ["--cpu-threads", "1"]


@dataclasses.dataclass(frozen=True)
class InferenceEngine:
    """Which server `fit` starts: ours, or vLLM's own (from `vllm_python`)."""

    name: str = "ours"
    vllm_python: str | None = None


async def _inference_server(
    supervisor: Supervisor,
    checkpoint: str,
    model_name: str,
    port: int,
    server: InferenceEngine | None = None,
    *,
    batch: int = INFERENCE_BATCH,
) -> str:
    """Start the inference server on `checkpoint` (ours generating at most `batch` sequences together);
    its OpenAI base URL once it answers."""
    if server is not None and server.name == "vllm":
        return await _vllm_server(supervisor, checkpoint, model_name, port, server)
    command = cli_command(
        "serve-model",
        *("--checkpoint", checkpoint, "--port", str(port), "--served-model-name", model_name),
        *("--max-batch-size", str(batch), *_cpu_threads_args()),
    )
    child = supervisor.start("inference", command, env=child_env())
    url = f"http://127.0.0.1:{port}"
    await supervisor.wait_http(child, f"{url}/healthz")
    return f"{url}/v1"


async def _vllm_server(
    supervisor: Supervisor, checkpoint: str, model_name: str, port: int, server: InferenceEngine
) -> str:
    """vLLM's OpenAI server on `checkpoint` (its context: the model's positions, at most 4096).
    On a CPU without graph compilation: it saves 30-50 s of start and is as fast within noise."""
    config = json.loads((Path(checkpoint) / "config.json").read_text())
    command = vllm_command(
        checkpoint,
        port=port,
        python=vllm_python(server.vllm_python),
        served_model_name=model_name,
        max_model_len=min(int(config.get("max_position_embeddings") or 4096), 4096),
        enforce_eager=not has_cuda(),
    )
    child = supervisor.start("inference", command, env=vllm_env())
    url = f"http://127.0.0.1:{port}"
    await supervisor.wait_http(child, f"{url}/health", timeout=VLLM_START_TIMEOUT, interval=0.5)
    return f"{url}/v1"


def _start_runners(
    supervisor: Supervisor, spec: AgentSpec, store_url: str, proxy_url: str, workers: int, processes: int
) -> None:
    """`processes` runner children sharing `workers` concurrent rollouts as evenly as possible."""
    for index in range(processes):
        share = workers // processes + (1 if index < workers % processes else 0)
        command = cli_command(
            "runner",
            "--store",
            store_url,
            "--proxy-url",
            proxy_url,
            "--workers",
            str(share),
            "--no-progress",
            "--stop-timeout",
            "5",
            *spec.runner_args(),
        )
        supervisor.start(f"runner-{index}", command, env=child_env())


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C while fit runs (asyncio turns SIGINT into a clean cancel)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
