"""The algorithms `fit` runs, one after another on the same store: "rl" (LightningRL), "sft" (SFT on
successes), "apo" (prompt optimization), or a sequence such as ["apo", "rl"]: optimize the prompt,
then train the weights under the best one (docs/algorithms.md).

A weight stage binds the store's latest `prompt` version (when there is one) into every rollout's
resource set beside the LLM, so the agent reads the prompt APO chose. Each stage after the first
continues the step numbers and metrics.csv of the one before; metrics rows say which stage wrote them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from algorithm import Evaluate, Task
from lightningrl.algorithms.apo import APO, APOConfig, APOResult
from lightningrl.algorithms.sft import SFT
from lightningrl.config_fields import dataclass_from_dict, replaced_from_dict
from lightningrl.curation import Curation, probe
from lightningrl.evaluation.report import EvalReport, eval_stage
from lightningrl.release.plan_filing import file_plan_id
from lightningrl.release.stop import gate_stop_check
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.loop import LightningRL
from lightningrl.rl.metrics import MetricsLog
from lightningrl.rl.trackers import RunTrackers
from lightningstore import LLM, LightningStore, PromptTemplate, RolloutConfig

ALGORITHMS = ("rl", "sft", "apo")
WEIGHT_ALGORITHMS: dict[str, type[LightningRL]] = {"rl": LightningRL, "sft": SFT}
FIT_APO_KEYS = ("score_on", "score_tasks")
"""Keys of fit's `apo` settings that are fit's, not APOConfig's (see `scoring`)."""
PROMPT_NAME = "prompt"
"""The PromptTemplate resource APO optimizes and the weight stages bind (agents read
`resources.prompts["prompt"]`)."""


def algorithm_sequence(value: str | Sequence[str], *, probe: int = 0, evaluate: int = 0) -> tuple[str, ...]:
    """`value` as the names of the stages to run, or a ValueError naming the bad one. With `probe`
    (k rollouts per train task first, see `probe_stage`) or `evaluate` (k rollouts per row in the
    validation mode, `lightningrl.evaluation`) no stage at all is allowed: probe or evaluate only."""
    for name, k in (("probe", probe), ("evaluate", evaluate)):
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"{name} must be an integer >= 0 (0: no {name}), got {k!r}")
    names = (value,) if isinstance(value, str) else tuple(value)
    if not names and not probe and not evaluate:
        raise ValueError(f"algorithm must name at least one of {', '.join(ALGORITHMS)}, got []")
    for name in names:
        if name not in ALGORITHMS:
            raise ValueError(
                f"algorithm must be one of {', '.join(map(repr, ALGORITHMS))} or a list of them, got {name!r}"
            )
    return names


def stage_configs(
    names: tuple[str, ...], config: LightningRLConfig, sft: LightningRLConfig | Mapping[str, Any] | None
) -> dict[str, LightningRLConfig]:
    """The config of each weight stage: `config` for "rl"; for "sft", `config` with `sft`'s fields
    replaced (a dict of LightningRLConfig fields, e.g. {"steps": 4}) or `sft` itself."""
    out = {"rl": config} if "rl" in names else {}
    if "sft" in names:
        if isinstance(sft, LightningRLConfig):
            out["sft"] = sft
        else:
            out["sft"] = replaced_from_dict(config, sft or {}, "sft")
            out["sft"].output_dir = config.output_dir
        from lightningrl.algorithms.sft import sft_config

        sft_config(out["sft"])  # its refusals (several epochs, mini-batches, ...) before a process starts
    elif sft is not None:
        raise ValueError("sft settings were given but algorithm has no 'sft' stage")
    return out


def apo_config(value: APOConfig | Mapping[str, Any] | None, *, llm_name: str, served: LLM) -> APOConfig:
    """APO's settings: an APOConfig, or a dict of its fields. Without an `optimizer_model` the
    optimizer is the policy itself, as its inference server serves it (a weak optimizer: point
    `optimizer_model`/`optimizer_base_url` at a stronger OpenAI-compatible endpoint for real use)."""
    if isinstance(value, APOConfig):
        return value
    data = {"llm_name": llm_name, "prompt_name": PROMPT_NAME, **(value or {})}
    for key in FIT_APO_KEYS:
        data.pop(key, None)
    if "optimizer_model" not in data:
        data["optimizer_model"] = f"openai/{served.model}"
        data.setdefault("optimizer_base_url", served.endpoints[0])
    return dataclass_from_dict(APOConfig, data, "apo")


def check_apo_settings(value: APOConfig | Mapping[str, Any] | None, llm_name: str) -> None:
    """APO's settings' errors (unknown key, wrong type) before a process starts."""
    placeholder = LLM(endpoints=["http://127.0.0.1:1/v1"], model="policy")
    apo_config(value, llm_name=llm_name, served=placeholder)
    scoring(value)


def scoring(value: APOConfig | Mapping[str, Any] | None) -> tuple[str, int]:
    """fit's own APO keys: `score_on` ("val": candidates are scored on `val`, which then measures the
    selection itself; "train": on `score_tasks` train tasks drawn by the seed, so `val` stays unseen);
    `score_tasks` also bounds the train tasks whose failures the optimizer reads (default 32)."""
    data = value if isinstance(value, Mapping) else {}
    score_on, count = data.get("score_on", "val"), data.get("score_tasks", 32)
    if score_on not in ("val", "train"):
        raise ValueError(f"apo.score_on must be 'val' or 'train', got {score_on!r}")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"apo.score_tasks must be an integer >= 1, got {count!r}")
    return score_on, count


async def publish_start_prompt(store: LightningStore, prompt: str | None) -> str | None:
    """The latest `prompt` version id; `prompt` is published as its first version when the store has
    none (a resumed run keeps the store's, which APO may have improved)."""
    latest = await store.get_latest_version(PROMPT_NAME)
    if latest is not None:
        return latest.version_id
    if prompt is None:
        return None
    version = await store.add_resource_version(
        PROMPT_NAME, PromptTemplate(template=prompt), created_by="fit", metadata={"fit": "start prompt"}
    )
    return version.version_id


@dataclass
class StageRun:
    """What the stages left: the last weight stage's metrics, APO's result, the object running now."""

    metrics: MetricsLog | None = None
    apo: APOResult | None = None
    current: LightningRL | None = None
    stopped_reason: str | None = None
    notes: list[str] = field(default_factory=list)
    apo_scoring: tuple[str, int] = ("val", 32)
    """fit's `apo` keys `score_on` and `score_tasks` (see `scoring`)."""
    probe: Curation | None = None
    """The pass-rate probe's curation (`probe_stage`), when fit ran one."""
    evaluation: EvalReport | None = None
    """The evaluation's report (`lightningrl.evaluation.eval_stage`), when fit ran one."""
    trackers: RunTrackers | None = None
    """The run's experiment trackers (fit opens them once; every stage's rows go to them)."""


async def run_stages(
    names: tuple[str, ...],
    store: LightningStore,
    train_tasks: list[Task],
    val_tasks: list[Task],
    configs: dict[str, LightningRLConfig],
    *,
    base: LightningRLConfig,
    apo: Callable[[], Awaitable[APOConfig]],
    rollout_config: RolloutConfig,
    row_extras: list[Callable[[], dict[str, Any]]],
    console: Console,
    state: StageRun,
    watched: Callable[[Awaitable[Any]], Awaitable[Any]],
    probe: int = 0,
    evaluate: int = 0,
) -> StageRun:
    """Run the stages in order; `watched` runs each one while fit's supervisor watches its children.
    With `evaluate`, the model is first evaluated on the train rows (k rollouts each, the validation
    mode). With `probe`, the starting policy's pass rates come next and the stages train on the tasks
    kept."""
    if evaluate:
        state.evaluation = await eval_stage(
            store, train_tasks, evaluate, resource_name=base.resource_name, prompt_name=PROMPT_NAME,
            mode=base.val_mode, success_threshold=base.success_threshold,
            timeout=base.step_timeout * max(1, math.ceil(evaluate * len(train_tasks) / 64)),
            output_dir=base.output_dir, rollout_config=rollout_config, console=console, watched=watched,
        )  # fmt: skip
    if probe:
        state.probe = await probe_stage(
            store, train_tasks, probe, base, rollout_config=rollout_config, console=console, watched=watched
        )
        train_tasks = state.probe.kept
    for name in names:
        if name == "apo":
            state.apo = await _apo_stage(
                store, train_tasks, val_tasks, await apo(), base,
                rollout_config=rollout_config, console=console, state=state, watched=watched,
            )  # fmt: skip
            continue
        cfg = configs[name]
        # The release gate's hooks: the training plan filed before the first step, its stop check after each.
        weights = WEIGHT_ALGORITHMS[name](
            store, train_tasks, val_tasks, cfg, console=console,
            stop_check=gate_stop_check if cfg.gate_stop else None, file_plan=file_plan_id,
        )  # fmt: skip
        weights.rollout_config = rollout_config
        weights.row_extras.extend(row_extras)
        weights.row_extras.append(lambda name=name: {"algorithm": name})
        prompt = await store.get_latest_version(PROMPT_NAME)
        if prompt is not None:
            weights.bound_resources = {PROMPT_NAME: prompt.version_id}
        last = weights.resume()
        # `steps` is the stage's total, as in HF Trainer, verl and Agent Lightning: a resumed run finishes
        # it, and a finished one trains nothing more unless `steps` is raised.
        done = trained_steps(weights.metrics.rows, name)
        if done >= cfg.steps:
            console.print(
                f"{name}: already trained {done} of steps={cfg.steps} in {cfg.output_dir}: nothing to do "
                "(raise steps to train more)",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
            state.metrics = weights.metrics
            continue
        if done:
            console.print(
                f"{name}: resuming after step {last}: {cfg.steps - done} of steps={cfg.steps} left",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
            weights.config = dataclasses.replace(weights.config, steps=cfg.steps - done)
        weights.trackers = state.trackers
        state.current = weights
        try:
            state.metrics = await watched(weights.run())
        finally:
            # A Ray trainer's ranks are processes of their own: stop them before the next stage.
            close = getattr(weights.trainer, "close", None)
            if close is not None:
                await asyncio.to_thread(close)
        state.stopped_reason = weights.stopped_reason
        if weights.stopped_reason:
            break
    return state


def trained_steps(rows: Sequence[Mapping[str, Any]], algorithm: str) -> int:
    """Steps of `algorithm` a metrics log holds (its rows after step 0; rows written before rows were
    labelled count for any algorithm)."""
    return sum(1 for r in rows if int(r.get("step", 0)) > 0 and r.get("algorithm", algorithm) == algorithm)


async def probe_stage(
    store: LightningStore,
    train_tasks: list[Task],
    k: int,
    cfg: LightningRLConfig,
    *,
    rollout_config: RolloutConfig,
    console: Console,
    watched: Callable[[Awaitable[Any]], Awaitable[Any]],
) -> Curation:
    """`k` train-mode rollouts of every train task by the starting policy (the latest version, with
    the latest prompt bound); prints the pass-rate table by `balance_by` and what is kept. Its
    timeout is `step_timeout` per step's worth of rollouts (tasks_per_step x rollouts_per_task)."""
    start = await store.get_latest_version(cfg.resource_name)
    assert start is not None
    bound = {cfg.resource_name: start.version_id}
    prompt = await store.get_latest_version(PROMPT_NAME)
    if prompt is not None:
        bound[PROMPT_NAME] = prompt.version_id
    resources = await store.add_resource_set(bound)
    steps_worth = math.ceil(k * len(train_tasks) / (cfg.tasks_per_step * cfg.rollouts_per_task))
    curation: Curation = await watched(
        probe(
            store, train_tasks, k=k, resources_id=resources.resources_id,
            success_threshold=cfg.success_threshold, timeout=cfg.step_timeout * max(1, steps_worth),
            slice_by=cfg.balance_by, rollout_config=rollout_config,
        )
    )  # fmt: skip
    for text in (f"probe: {k} rollouts per train task\n{curation.table()}", f"probe: {curation.summary()}"):
        console.print(text, markup=False, highlight=False, soft_wrap=True)  # a table: never wrapped
    return curation


async def _apo_stage(
    store: LightningStore,
    train_tasks: list[Task],
    val_tasks: list[Task],
    config: APOConfig,
    cfg: LightningRLConfig,
    *,
    rollout_config: RolloutConfig,
    console: Console,
    state: StageRun,
    watched: Callable[[Awaitable[Any]], Awaitable[Any]],
) -> APOResult:
    """APO on its scoring tasks; then the start and the best prompt on `val_tasks` as two metrics rows
    (`val/success` before and after, with APO's scores), so a weight stage after it continues there."""
    score_on, count = state.apo_scoring
    # At most `count` train tasks show the failures (and another `count` score, on "train"): bounded.
    drawn = random.Random(cfg.seed).sample(train_tasks, min(2 * count, len(train_tasks)))
    failures = drawn[:count]
    scored = val_tasks if score_on == "val" else (drawn[count:] or drawn)
    algo = APO(store, failures, scored, config, file_plan=file_plan_id)
    algo.rollout_config = rollout_config
    result: APOResult = await watched(algo.run())
    line = (
        f"apo: score on {score_on} {result.start.score:.3f} -> {result.best.score:.3f} "
        f"({len(result.candidates)} candidates; prompt version {result.best.version.version_id})"
    )
    state.notes.append(line)
    console.print(line, markup=False, highlight=False)
    metrics = MetricsLog.resume(cfg.output_dir / "metrics.csv")
    metrics.trackers = state.trackers
    step = max((int(r["step"]) for r in metrics.rows if "step" in r), default=-1) + 1
    llm = await store.get_latest_version(config.llm_name)
    assert llm is not None
    columns = {"apo/candidates": len(result.candidates), "apo/score_on_val": float(score_on == "val")}
    held_out: dict[str, Any] = {}
    for offset, (label, candidate) in enumerate((("start", result.start), ("best", result.best))):
        row: dict[str, Any] = {
            "step": step + offset,
            "algorithm": "apo",
            f"apo/score_{label}": candidate.score,
        }
        if val_tasks and candidate is result.start and held_out:
            # No candidate beat the start: the same prompt, so the same held-out result (sampling it
            # again would show the evaluation's noise as a change).
            row.update(held_out)
        elif val_tasks:
            bound = await store.add_resource_set(
                {config.llm_name: llm.version_id, config.prompt_name: candidate.version.version_id}
            )
            held = await watched(
                Evaluate(
                    store, val_tasks, resources_id=bound.resources_id, n=cfg.val_rollouts_per_task,
                    mode=cfg.val_mode, timeout=cfg.step_timeout, success_threshold=cfg.success_threshold,
                    rollout_config=rollout_config, group_prefix=f"apo/heldout/{label}/",
                ).run()
            )  # fmt: skip
            held_out = {"val/success": held.success_rate, "val/reward_mean": held.mean_reward}
            held_out.update({f"val/success[{k}]": v for k, v in held.by_tag.items()})
            row.update(held_out)
        metrics.log({**row, **columns})
    state.metrics = metrics
    return result
