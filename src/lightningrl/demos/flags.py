"""What the example demos share: their RL and warm-up flags, the LightningRLConfig those flags make, and
the closing `held-out success: before X after Y` report."""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightningrl.demos.warmup import WarmupConfig
from lightningrl.fitting.result import TrainResult
from lightningrl.rl.advantages import BASELINES, AdvantageConfig
from lightningrl.rl.config import LightningRLConfig
from lightningrl.trainer.config import TrainerConfig
from lightningrl.trainer.loss import PolicyLossConfig

DEMO_ADVANTAGE = AdvantageConfig(norm_by_std=False, baseline="group_and_call", negative_weight=0.5)
"""The toy demos' GRPO: Dr.GRPO (no division by the group's std), each call against the same call of
its siblings, failures at half weight."""


@dataclass(frozen=True)
class DemoDefaults:
    """One demo's default for each shared flag (`add_demo_flags`)."""

    output: str
    steps: int = 40
    tasks_per_step: int = 12
    n: int = 8
    val_every: int = 20
    lr: float = 1.5e-4
    workers: int = 32
    hidden: int = 128
    layers: int = 2
    warmup_steps: int = 300
    warmup_lr: float = 3e-3
    warmup_until_loss: float | None = None
    warmup_max_steps: int = 900
    mini_batch: int = 24
    ppo_epochs: int = 4
    negative_weight: float = DEMO_ADVANTAGE.negative_weight


def add_demo_flags(parser: argparse.ArgumentParser, defaults: DemoDefaults) -> None:
    """The flags every demo takes: run size, RL settings, tiny model and warm-up."""
    d = defaults
    p = parser
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default=d.output)
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--tasks-per-step", type=int, default=d.tasks_per_step)
    p.add_argument("--n", type=int, default=d.n, help="rollouts per task (GRPO group size)")
    p.add_argument("--val-every", type=int, default=d.val_every)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--workers", type=int, default=d.workers, help="rollouts in flight")
    p.add_argument("--hidden", type=int, default=d.hidden)
    p.add_argument("--layers", type=int, default=d.layers)
    p.add_argument("--warmup-steps", type=int, default=d.warmup_steps)
    p.add_argument("--warmup-lr", type=float, default=d.warmup_lr)
    p.add_argument(
        "--warmup-until-loss",
        type=float,
        default=d.warmup_until_loss,
        help="after --warmup-steps, go on until the mean loss of 30 steps is this low (a skill such as "
        "copying numbers emerges late for some seeds)",
    )
    p.add_argument("--warmup-max-steps", type=int, default=d.warmup_max_steps)
    p.add_argument(
        "--warmup-from", default=None, help="reuse a warmed-up model directory (skips the warm-up)"
    )
    p.add_argument("--loss-agg", default="token-mean", help="verl loss aggregation mode")
    p.add_argument("--mini-batch", type=int, default=d.mini_batch, help="sequences per optimiser step")
    p.add_argument("--ppo-epochs", type=int, default=d.ppo_epochs)
    p.add_argument("--lr-schedule", choices=["constant", "cosine"], default="cosine")
    p.add_argument("--min-lr-ratio", type=float, default=0.3, help="cosine floor as a fraction of --lr")
    add_advantage_flags(p, dataclasses.replace(DEMO_ADVANTAGE, negative_weight=d.negative_weight))
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="same seed, same metrics: rollouts named by step and task, each call's sampling seeded",
    )
    p.add_argument(
        "--fill-rounds",
        type=int,
        default=0,
        help="extra rounds of fresh tasks for groups whose rewards all agreed (fit's default: 2)",
    )
    p.add_argument("--trainer", choices=["local", "ray"], default="local", help="trainer backend")
    p.add_argument("--trainer-workers", type=int, default=1, help="actor ranks of the ray trainer")


def add_advantage_flags(parser: argparse.ArgumentParser, defaults: AdvantageConfig = DEMO_ADVANTAGE) -> None:
    """The GRPO advantage and KL flags (`advantage_config` reads them), defaulting to `defaults`."""
    p = parser
    p.add_argument(
        "--std-norm",
        action=argparse.BooleanOptionalAction,
        default=defaults.norm_by_std,
        help="GRPO's std normalisation (--no-std-norm: Dr.GRPO, no division by the group's std)",
    )
    p.add_argument(
        "--baseline",
        choices=list(BASELINES),
        default=defaults.baseline,
        help="GRPO baseline: sibling calls of the same role (agent and kind of decision), the same call "
        "position, or every call of the task's rollouts",
    )
    p.add_argument(
        "--negative-weight",
        type=float,
        default=defaults.negative_weight,
        help="scale of negative advantages (examples/calc/README: an early collapse)",
    )
    p.add_argument("--kl-coef", type=float, default=0.0, help="verl KL loss to the warmed-up model (0: off)")


def advantage_config(args: argparse.Namespace) -> AdvantageConfig:
    """The AdvantageConfig of `add_advantage_flags`' flags."""
    return AdvantageConfig(
        estimator="grpo",
        norm_by_std=args.std_norm,
        negative_weight=args.negative_weight,
        baseline=args.baseline,
    )


def demo_argument_parser(description: str | None, defaults: DemoDefaults) -> argparse.ArgumentParser:
    """A demo's parser (its module docstring as the help text) holding the shared flags."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_demo_flags(parser, defaults)
    return parser


def demo_rl_config(args: argparse.Namespace, **fields: Any) -> LightningRLConfig:
    """The LightningRLConfig of the shared flags; `fields` set the demo's own (balance_by, agent_names...).

    The toy demos keep the recipe their results were measured with (docs/experiments.md), which
    predates dynamic sampling: no extra rounds, no larger groups unless `--fill-rounds` asks. They keep
    every step's checkpoint (a few MB each): `replay_update.py` replays step N from step N-1's."""
    config = LightningRLConfig(
        keep_checkpoints=None,
        steps=args.steps,
        tasks_per_step=args.tasks_per_step,
        rollouts_per_task=args.n,
        val_every=args.val_every,
        seed=args.seed,
        deterministic=args.deterministic,
        dynamic_sampling=args.fill_rounds > 0,
        max_fill_rounds=args.fill_rounds,
        hard_slice_factor=2 if args.fill_rounds > 0 else 1,
        advantage=advantage_config(args),
        trainer=TrainerConfig(
            lr=args.lr,
            micro_batch_size=64,
            mini_batch_size=args.mini_batch,
            lr_schedule=args.lr_schedule,
            min_lr_ratio=args.min_lr_ratio,
            total_training_steps=args.steps,
            ppo_epochs=args.ppo_epochs,
            shuffle=True,
            seed=args.seed,
            loss=PolicyLossConfig(loss_agg_mode=args.loss_agg, kl_loss_coef=args.kl_coef),
            backend=args.trainer,
            num_workers=args.trainer_workers,
        ),
    )
    return dataclasses.replace(config, **fields)


def demo_warmup_config(args: argparse.Namespace, **fields: Any) -> WarmupConfig:
    """The WarmupConfig of the shared warm-up flags; `fields` set the demo's own (batch_size...)."""
    return WarmupConfig(
        steps=args.warmup_steps,
        lr=args.warmup_lr,
        seed=args.seed,
        until_loss=args.warmup_until_loss,
        max_steps=args.warmup_max_steps,
        **fields,
    )


def fresh_run_dir(output: str | Path, name: str) -> Path:
    """`output/name` made empty, as an absolute path (the store records checkpoint paths)."""
    out = Path(output).resolve() / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return out


def heldout_slices(row: dict[str, Any]) -> dict[str, float]:
    """A validation row's success per tag value (`val/success[op=plus]` -> `op=plus`)."""
    return {k[len("val/success[") : -1]: round(v, 2) for k, v in row.items() if k.startswith("val/success[")}


def report_heldout(
    result: TrainResult,
    started: float,
    seed: int,
    console: Any,
    *,
    describe: Callable[[str, dict[str, Any]], str] | None = None,
) -> str:
    """Print the first and last validation (each with its slices; `describe(label, row)` replaces that
    line), the metrics and curve paths, and as the last line `held-out success: before X after Y (seed S,
    N RL steps, W s wall)`, which is returned."""
    validations = [r for r in result.metrics if "val/success" in r]
    wall = time.perf_counter() - started
    if not validations:
        last = f"no held-out validation ran (seed {seed}, {result.steps} RL steps, {wall:.0f} s wall)"
        print(last, flush=True)
        return last
    before, after = validations[0], validations[-1]
    for label, row in (("before", before), ("after", after)):
        line = (
            describe(label, row)
            if describe
            else f"held-out success {label} RL: {row['val/success']:.2f}  {heldout_slices(row)}"
        )
        console.print(line, markup=False)
    console.print(f"metrics: {result.metrics_csv}   reward curve: {result.reward_curve}", markup=False)
    last = (
        f"held-out success: before {before['val/success']:.2f} after {after['val/success']:.2f} "
        f"(seed {seed}, {result.steps} RL steps, {wall:.0f} s wall)"
    )
    print(last, flush=True)
    return last
