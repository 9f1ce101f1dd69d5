"""What the demos on SmolLM2-135M-Instruct share: their flags, their RL settings, and one run (a short
supervised warm-up on format-only demonstrations, then `fit` with greedy held-out validation).

A demo supplies the agent, its train and held-out rows and its demonstrations; `run_real_model_demo`
prints the demo's closing line, `held-out success: before X after Y (seed S, N RL steps, W s wall)`.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console

from lightningrl.demos.flags import (
    add_advantage_flags,
    advantage_config,
    fresh_run_dir,
    report_heldout,
)
from lightningrl.demos.warmup import WarmupConfig, supervised_warmup
from lightningrl.rl.advantages import AdvantageConfig
from lightningrl.rl.config import LightningRLConfig
from lightningrl.trainer.config import TrainerConfig


@dataclasses.dataclass(frozen=True)
class RealModelDefaults:
    """A demo's defaults for the shared flags (each is a flag of the same name)."""

    output: str
    steps: int = 10
    tasks_per_step: int = 4
    n: int = 4
    lr: float = TrainerConfig().lr
    """The library's default: the real-model demos run `fit`'s recipe, choosing only the run's size."""
    micro_batch: int = TrainerConfig().micro_batch_size
    """The library's: with shared-prefix training a micro-batch of 8 rows is one packed row per prompt."""
    workers: int = 16
    train_tasks: int = 512
    warmup_steps: int = 12
    warmup_batch: int = 4
    warmup_lr: float = 5e-5


def add_real_model_flags(p: argparse.ArgumentParser, defaults: RealModelDefaults) -> None:
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default=defaults.output)
    p.add_argument("--steps", type=int, default=defaults.steps)
    p.add_argument("--tasks-per-step", type=int, default=defaults.tasks_per_step)
    p.add_argument("--n", type=int, default=defaults.n, help="rollouts per task (GRPO group size)")
    p.add_argument("--val-every", type=int, default=0, help="0: before the first step and after the last")
    p.add_argument("--lr", type=float, default=defaults.lr)
    p.add_argument(
        "--lr-warmup-steps",
        type=int,
        default=TrainerConfig().lr_warmup_steps,
        help="RL steps over which the learning rate rises from 0 (the first step's is 0)",
    )
    add_advantage_flags(p, AdvantageConfig())
    p.add_argument(
        "--micro-batch",
        type=int,
        default=defaults.micro_batch,
        help="sequences a forward/backward (each prompt packed once with its responses)",
    )
    p.add_argument(
        "--param-dtype",
        choices=["fp32", "bf16"],
        default="fp32",
        help="the actor's compute dtype (bf16: fp32 master weights, ~1.5x faster updates on this CPU)",
    )
    p.add_argument("--workers", type=int, default=defaults.workers, help="rollouts in flight")
    p.add_argument(
        "--fill-rounds",
        type=int,
        default=LightningRLConfig().max_fill_rounds,
        help="extra rounds of fresh tasks for groups whose rewards all agreed (0: none)",
    )
    p.add_argument(
        "--hard-slice-factor",
        type=int,
        default=LightningRLConfig().hard_slice_factor,
        help="group-size multiplier of a slice that rarely succeeds (1: off)",
    )
    p.add_argument(
        "--keep-checkpoints",
        type=int,
        default=1,
        help="step checkpoints kept, newest first (~0.5 GB each); 0 keeps every step's",
    )
    p.add_argument("--train-tasks", type=int, default=defaults.train_tasks, help="train tasks drawn from")
    p.add_argument(
        "--warmup-steps",
        type=int,
        default=defaults.warmup_steps,
        help="0: RL from the instruct model itself",
    )
    p.add_argument("--warmup-batch", type=int, default=defaults.warmup_batch)
    p.add_argument("--warmup-lr", type=float, default=defaults.warmup_lr)
    p.add_argument(
        "--warmup-demos",
        choices=["random", "correct"],
        default="random",
        help="random: the call format with the decision picked at random (RL learns it); correct: the right one",
    )


def real_model_rl_config(args: argparse.Namespace, *, balance_by: str, **fields: Any) -> dict:
    """`fit`'s recipe (the library's advantage, lr and loss defaults), with the run's size, balance and
    micro-batch from the flags; the advantage, lr and KL flags try others (`--no-std-norm --baseline
    group_and_call --negative-weight 0.5 --lr 2e-5` is the setting of the 2026-12-06 invocation)."""
    return {
        "steps": args.steps,
        "tasks_per_step": args.tasks_per_step,
        "rollouts_per_task": args.n,
        "val_every": args.val_every or args.steps,
        "seed": args.seed,
        "balance_by": balance_by,
        "dynamic_sampling": args.fill_rounds > 0,
        "max_fill_rounds": args.fill_rounds,
        "hard_slice_factor": args.hard_slice_factor,
        "keep_checkpoints": args.keep_checkpoints or None,
        "advantage": dataclasses.asdict(advantage_config(args)),
        "trainer": {
            "loss": {"kl_loss_coef": args.kl_coef},
            "lr": args.lr,
            "lr_warmup_steps": args.lr_warmup_steps,
            "micro_batch_size": args.micro_batch,
            "mini_batch_size": None,
            "ppo_epochs": 1,
            **({"param_dtype": "bf16"} if args.param_dtype == "bf16" else {}),
        },
        **fields,
    }


def run_real_model_demo(
    title: str,
    agent: Callable[..., Any],
    train_rows: Sequence[dict],
    heldout_rows: Sequence[dict],
    demonstrations: Callable[[int], list[tuple]],
    args: argparse.Namespace,
    *,
    balance_by: str,
    run_name: str | None = None,
    **config: Any,
) -> str:
    """Warm SmolLM2 up on `demonstrations(count)` (skipped for `--warmup-steps 0`), train `agent` with
    `fit` (greedy held-out validation before the first step and after the last), print and return the
    closing line."""
    from lightningrl import cached_model, fit

    console = Console(soft_wrap=True)
    started = time.perf_counter()
    out = fresh_run_dir(args.output, run_name or f"seed{args.seed}")
    console.rule(f"[bold]LightningRL on SmolLM2-135M-Instruct: {title}, seed {args.seed}")
    model = cached_model("smollm2")
    if args.warmup_steps:
        model, losses = supervised_warmup(
            model,
            demonstrations(args.warmup_steps * args.warmup_batch),
            out / "model-warmup",
            WarmupConfig(
                steps=args.warmup_steps, batch_size=args.warmup_batch, lr=args.warmup_lr, seed=args.seed
            ),
            console=console,
        )
        console.print(
            f"warmed up on {args.warmup_demos} demonstrations ({len(losses)} steps, last loss {losses[-1]:.3f}, "
            f"{time.perf_counter() - started:.0f} s)"
        )
    result = fit(
        agent,
        list(train_rows[: args.train_tasks]),
        list(heldout_rows),
        model=model,
        config=real_model_rl_config(args, balance_by=balance_by, **config),
        sampling_by_mode={"val": {"temperature": 0.0}},
        workers=args.workers,
        runner_processes=2,
        engine="ours",
        output_dir=out,
        console=console,
    )
    return report_heldout(result, started, args.seed, console)
