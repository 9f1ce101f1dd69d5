"""`fit`: train an agent in one call. It starts what is missing as separate processes (store server,
inference server, runners), runs the RL loop here against the store server, and stops them all.

Layout and lifecycle: docs/deployment.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sys
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console

from lightningrl.algorithms.apo import APOConfig
from lightningrl.config_fields import config_from
from lightningrl.datasets import Rows, load_tasks
from lightningrl.evaluation.report import ServedModel
from lightningrl.fitting.interrupts import (
    FitInterrupted,
    interrupted_text,
    show_interrupts_briefly,
    sigterm_as_interrupt,
)
from lightningrl.fitting.result import TrainResult
from lightningrl.fitting.stages import (
    PROMPT_NAME,
    StageRun,
    algorithm_sequence,
    apo_config,
    check_apo_settings,
    publish_start_prompt,
    run_stages,
    scoring,
    stage_configs,
)
from lightningrl.models.check import check_checkpoint
from lightningrl.processes.agent_spec import AgentSpec, agent_spec
from lightningrl.processes.faults import FIT_ROLLOUT_CONFIG, Recovery
from lightningrl.processes.run_tokens import RunTokens
from lightningrl.processes.supervisor import (
    Child,
    Supervisor,
    child_env,
    cli_command,
)
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.metrics import MetricsLog
from lightningrl.rl.trackers import RunTrackers
from lightningrl.rl.update_thread import update_running
from lightningrl.serving.launch import (
    InferenceEngine,
    InferenceLaunch,
)
from lightningrl.serving.llm_resource import llm_resource
from lightningrl.serving.reload_token import RELOAD_TOKEN_ENV, reload_token_for_run
from lightningrl.serving.vllm import check_reloadable, resolve_engine
from lightningstore import LLM, LightningStore, open_store, semconv
from lightningstore.auth import ENV_VARS, Role
from lightningstore.server.run import free_port
from runner.credentials import PROVIDER_KEYS

ENGINES = ("auto", "ours", "vllm")
DEFAULT_OUTPUT_DIR = Path("runs/fit")
T = TypeVar("T")
"""The train mode samples from the model's own distribution: the trainer's log-probs assume it."""
NOT_FOR_RUNNERS = (
    frozenset(v for role, v in ENV_VARS.items() if role != Role.RUNNER) | PROVIDER_KEYS | {RELOAD_TOKEN_ENV}
)
"""What runner processes never inherit from fit: other roles' tokens, and the provider keys the store
server's gateway calls providers with (an agent calls models through the gateway with its attempt's key)."""


def fit(
    agent: Any,
    train: Rows,
    val: Rows | None = None,
    *,
    model: str | Path | ServedModel,
    config: LightningRLConfig | Mapping[str, Any] | None = None,
    store: str | Path | None = None,
    workers: int = 8,
    engine: str = "auto",
    vllm_python: str | Path | None = None,
    output_dir: str | Path | None = None,
    runner_processes: int | None = None,
    sampling_by_mode: Mapping[str, Mapping[str, Any]] | None = None,
    console: Console | None = None,
    algorithm: str | Sequence[str] = "rl",
    prompt: str | None = None,
    sft: LightningRLConfig | Mapping[str, Any] | None = None,
    apo: APOConfig | Mapping[str, Any] | None = None,
    probe: int = 0,
    trackers: Sequence[str] | None = None,
    evaluate: int = 0,
) -> TrainResult:
    """Train `agent` on `train` (held-out `val`) starting from the checkpoint `model`.

    - agent: a `@rollout` function, a LitAgent class or top-level instance, `"module:function"`,
      `"path/to/script.py:function"`, or a command line (a list, or any other str) run per rollout.
    - train / val: a list of dicts, a JSONL path or an iterable of dicts (see `lightningrl.datasets`).
    - config: a LightningRLConfig or a dict of its fields.
    - output_dir: metrics, checkpoints, logs and the default store (default: the config's `output_dir`
      when it sets one, else runs/fit; the two set differently is an error).
      `{"trainer": {"backend": "ray", "num_workers": 4}}` trains on 4 Ray ranks (docs/scaling.md).
    - store: None (`output_dir/store.db`), a SQLite path, a `postgresql://` URL, or the URL of a
      running store server (`http(s)://`; then no store server is started).
    - workers: concurrent rollouts in all, split over `runner_processes` processes
      (default `min(workers, os.cpu_count())`).
    - engine: "ours" (our inference server), "vllm" (vLLM's own server, from `vllm_python` or
      $LIGHTNINGRL_VLLM_PYTHON or `.venv-vllm`: see docs/serving.md; tied output heads sync through
      our worker extension) or "auto" (vllm when it is installed and a GPU is present).
    - sampling_by_mode: the published LLM's per-mode sampling (e.g. `{"val": {"temperature": 1.0}}`
      to measure held-out success at the training temperature; default: val 0.7, test greedy).
    - algorithm: "rl" (LightningRL), "sft" (fine-tuning on successes), "apo" (prompt optimization)
      or a sequence run in order, e.g. ["apo", "rl"] (docs/algorithms.md). "sft" takes `config` with
      `sft`'s fields replaced (a dict such as {"steps": 4}); "apo" takes `apo` (an APOConfig or a dict
      of its fields; the optimizer defaults to the policy as served) and needs `prompt` and `val`.
    - prompt: the starting prompt template (f-string): published as the `prompt` resource when the
      store has none, and bound into every rollout; the agent reads `resources.prompts["prompt"]`.
    - trackers: experiment trackers that get every metrics row, the config and the version ids too:
      any of "tensorboard", "mlflow", "wandb" (offline), writing under output_dir
      (`lightningrl.rl.trackers`); default: the config's `trackers`.
    - evaluate: k > 0 first rolls out the model k times per `train` row in the validation mode and
      reports success per slice with 95% intervals and pass@k (`result.evaluation`, `eval.json`);
      `algorithm=[]` evaluates only (`lightningrl.evaluate`, `lightningrl eval`).
    - probe: k > 0 first rolls out the starting policy k times per train task (k x |train| rollouts)
      and trains on the tasks it solves sometimes (`lightningrl.curation`); `algorithm=[]` probes only.

    Works inside a running event loop too (a Jupyter cell): training then runs on a thread of its own.
    A second call on the same output_dir and store resumes: it trains the resource's latest version
    and continues the metrics and step numbers up to `steps`, the run's total (as HF Trainer, verl
    and Agent Lightning count it): a finished run says so and trains nothing more unless `steps` is
    raised. Children stop on return, error, Ctrl-C and SIGTERM;
    Ctrl-C raises `FitInterrupted` (a KeyboardInterrupt), shown uncaught as one line saying the step
    reached and how to resume. A runner, inference server or store server that dies is restarted
    (its rollouts retried; at most 3 restarts within 10 minutes): docs/deployment.md.
    """
    spec = agent_spec(agent)
    cfg = config_from(config)
    out = _output_dir(output_dir, config, cfg)
    cfg = dataclasses.replace(cfg, output_dir=out)
    if trackers is not None:
        cfg = dataclasses.replace(cfg, trackers=tuple(trackers))
    tag_fields = [cfg.balance_by] if cfg.balance_by else []
    train_tasks = load_tasks(train, what="train", tag_fields=tag_fields)
    if not train_tasks:
        raise ValueError("train has no rows: give at least one task")
    val_tasks = load_tasks(val, what="val", tag_fields=tag_fields) if val is not None else []
    stages = algorithm_sequence(algorithm, probe=probe, evaluate=evaluate)
    configs = stage_configs(stages, cfg, sft)
    if "apo" in stages and (prompt is None or not val_tasks):
        raise ValueError(
            "algorithm 'apo' needs prompt= (the starting prompt template, e.g. 'Answer: {question}') and "
            "val= (held-out tasks that score each candidate prompt)"
        )
    if apo is not None and "apo" not in stages:
        raise ValueError("apo settings were given but algorithm has no 'apo' stage")
    if "apo" in stages:
        check_apo_settings(apo, cfg.resource_name)
    served = model if isinstance(model, ServedModel) else None
    if served is not None and (stages or probe or not evaluate):
        raise ValueError(
            "a ServedModel (a model served elsewhere) can be evaluated, not trained: give algorithm=[] and "
            "evaluate=k (or use lightningrl.evaluate)"
        )
    model_dir = Path(served.base_url if served else model)  # type: ignore[arg-type]
    if served is None:
        check_checkpoint(model_dir)  # every missing piece in one error, before a process starts
    engine = "ours" if served is not None else resolve_engine(engine, vllm_python)
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
    try:
        with Supervisor(out / "logs") as supervisor, sigterm_as_interrupt(), reload_token_for_run():
            return _run_to_end(
                lambda: _fit(
                    supervisor,
                    spec,
                    train_tasks,
                    val_tasks,
                    cfg,
                    model_dir=model_dir if served else model_dir.resolve(),
                    served=served,
                    server=server,
                    target=target,
                    workers=workers,
                    processes=processes,
                    console=console,
                    sampling_by_mode={k: dict(v) for k, v in (sampling_by_mode or {}).items()},
                    stages=stages,
                    configs=configs,
                    prompt=prompt,
                    apo=apo,
                    probe=probe,
                    evaluate=evaluate,
                )
            )
    except KeyboardInterrupt:
        if update_running() and threading.current_thread() is threading.main_thread():
            # A second Ctrl-C while an update thread still runs (the first one said so): the children
            # are stopped; nothing is left to wait for but a result that would be discarded.
            print(interrupted_text(out), file=sys.stderr, flush=True)
            os._exit(130)
        show_interrupts_briefly()
        raise FitInterrupted(interrupted_text(out)) from None


def _output_dir(given: str | Path | None, config: object, cfg: LightningRLConfig) -> Path:
    """`output_dir`, else the config's own `output_dir` when it sets one, else runs/fit; both set and
    different is refused (one of them would be ignored)."""
    in_config = (isinstance(config, Mapping) and "output_dir" in config) or (
        isinstance(config, LightningRLConfig) and cfg.output_dir != LightningRLConfig().output_dir
    )
    if given is None:
        return cfg.output_dir if in_config else DEFAULT_OUTPUT_DIR
    if in_config and Path(given) != cfg.output_dir:
        raise ValueError(
            f"output_dir={str(given)!r} and config's output_dir={str(cfg.output_dir)!r} differ: give one"
        )
    return Path(given)


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
    stages: tuple[str, ...] = ("rl",),
    configs: dict[str, LightningRLConfig] | None = None,
    prompt: str | None = None,
    apo: APOConfig | Mapping[str, Any] | None = None,
    probe: int = 0,
    evaluate: int = 0,
    served: ServedModel | None = None,
) -> TrainResult:
    own_server = not target.startswith(("http://", "https://"))
    tokens = RunTokens.for_run(os.environ) if own_server else None
    store_url = await _store_server(supervisor, target, (cfg.output_dir / "metrics.csv").resolve(), tokens)
    proxy_url = store_url.rstrip("/") + semconv.PROXY_PREFIX
    store = open_store(store_url, tokens.operator if tokens else None, role=Role.ALGORITHM)
    state = StageRun(apo_scoring=scoring(apo))

    def step() -> int:
        return state.current.global_step if state.current is not None else 0

    recovery = Recovery(supervisor, store, console, step=step)
    try:
        state.trackers = RunTrackers.for_config(cfg) if cfg.trackers else None
        llm, launch = await llm_resource(
            supervisor,
            store,
            cfg.resource_name,
            model_dir,
            sampling_by_mode,
            deterministic=cfg.deterministic,
            server=server,
            served=served,
        )
        await publish_start_prompt(store, prompt)
        # A served model's API key stays with the gateway: no runner (so no agent) inherits it.
        hidden = {served.api_key_env} if served is not None and served.api_key_env else set()
        _start_runners(supervisor, spec, store_url, proxy_url, workers, processes, tokens, hidden)
        for child in supervisor.children:
            recovery.restarts[child.name] = _restart_of(
                child,
                supervisor,
                store,
                store_url,
                launch,
                lambda: state.current.served_version_id if state.current else None,
            )
        if cfg.show_progress:
            console.print(
                f"store {store_url}  model {', '.join(llm.endpoints)}  "
                f"{processes} runner process(es) x {workers} rollouts  logs {supervisor.log_dir}",
                markup=False,
                highlight=False,
            )
            if tokens is not None and tokens.generated:
                console.print(
                    f"dashboard {store_url}/ui  (this run's viewer token: {tokens.by_role[Role.VIEWER]})",
                    markup=False,
                    highlight=False,
                )

        async def apo_settings() -> APOConfig:
            latest = await store.get_latest_version(cfg.resource_name)
            served = latest.resource if latest is not None and isinstance(latest.resource, LLM) else llm
            return apo_config(apo, llm_name=cfg.resource_name, served=served)

        await run_stages(
            stages,
            store,
            train_tasks,
            val_tasks,
            configs or {"rl": cfg},
            base=cfg,
            apo=apo_settings,
            rollout_config=FIT_ROLLOUT_CONFIG,
            row_extras=[recovery.columns],
            console=console,
            state=state,
            watched=lambda work: _watched(work, supervisor, recovery),
            probe=probe,
            evaluate=evaluate,
        )
        metrics = state.metrics or MetricsLog.resume(cfg.output_dir / "metrics.csv")
        latest = await store.get_latest_version(cfg.resource_name)
        assert latest is not None
        checkpoint = getattr(latest.resource, "checkpoint", None)
        held = [(int(r["step"]), float(r["val/success"])) for r in metrics.rows if "val/success" in r]
        before = next((v for s, v in held if s == 0), None)
        after = next((v for s, v in reversed(held) if s > 0), None)
        curve = cfg.output_dir / "reward_curve.png"
        prompt_version = await store.get_latest_version(PROMPT_NAME)
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
            stopped_reason=state.stopped_reason,
            prompt_version_id=prompt_version.version_id if prompt_version else None,
            apo=state.apo,
            probe=state.probe,
            evaluation=state.evaluation,
        )
    finally:
        if state.trackers is not None:
            state.trackers.close()
        await store.close()


async def _watched(work: Coroutine[Any, Any, T], supervisor: Supervisor, recovery: Recovery) -> T:
    """`work`'s result, while the supervisor restarts children that die (its error ends the work)."""
    running = asyncio.ensure_future(work)
    watching = asyncio.create_task(supervisor.watch(recovery.on_exit))
    try:
        await asyncio.wait({running, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (watching, running):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if watching.done() and not watching.cancelled() and watching.exception() is not None:
        raise watching.exception()  # type: ignore[misc]
    return running.result()


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


async def _store_server(
    supervisor: Supervisor, target: str, metrics_csv: Path, tokens: RunTokens | None
) -> str:
    """The store server's URL: `target` itself when it is one, else a `lightningrl store serve` child
    with `tokens` (its dashboard's training page charts `metrics_csv`)."""
    if target.startswith(("http://", "https://")):
        return target.rstrip("/")
    port = free_port()
    command = cli_command(
        "store", "serve", "--db", target, "--port", str(port), "--metrics-csv", str(metrics_csv)
    )
    env = {**child_env(), **(tokens.server_env() if tokens else {})}
    child = supervisor.start("store", command, env=env, restartable=True, withhold={RELOAD_TOKEN_ENV})
    url = f"http://127.0.0.1:{port}"
    await supervisor.wait_http(child, f"{url}/healthz")
    return url


def _restart_of(
    child: Child,
    supervisor: Supervisor,
    store: LightningStore,
    store_url: str,
    launch: InferenceLaunch | None,
    served: Callable[[], str | None],
) -> Callable[[Child], Coroutine[Any, Any, None]]:
    """How `fit` brings `child` back: the store server on its database and port, the inference server
    on the checkpoint of the version it served (`served()`), a runner as it was started."""

    async def restart(dead: Child) -> None:
        if dead.name == "store":
            supervisor.respawn(dead)
            await supervisor.wait_http(dead, f"{store_url}/healthz")
        elif dead.name == "inference" and launch is not None:
            checkpoint = await _served_checkpoint(store, served()) or launch.checkpoint
            again = dataclasses.replace(launch, checkpoint=checkpoint)
            supervisor.respawn(dead, again.command())
            await again.wait_ready(supervisor, dead)
        else:
            supervisor.respawn(dead)

    return restart


async def _served_checkpoint(store: LightningStore, version_id: str | None) -> str | None:
    """The checkpoint of version `version_id` (the one the inference server served), if any."""
    if version_id is None:
        return None
    version = await store.get_resource_version(version_id)
    resource = version.resource if version is not None else None
    return resource.checkpoint if isinstance(resource, LLM) and resource.checkpoint else None


def _start_runners(
    supervisor: Supervisor,
    spec: AgentSpec,
    store_url: str,
    proxy_url: str,
    workers: int,
    processes: int,
    tokens: RunTokens | None,
    hidden: set[str],
) -> None:
    """`processes` runner children sharing `workers` concurrent rollouts as evenly as possible, each
    holding the runner token and the agent secret (`tokens`, else the environment's) and nothing else."""
    env = {**child_env(), **(tokens.runner_env() if tokens else {})}
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
        withhold = NOT_FOR_RUNNERS | hidden
        supervisor.start(f"runner-{index}", command, env=env, restartable=True, withhold=withhold)
