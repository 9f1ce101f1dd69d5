"""The CPU demo: a tiny model learns, with RL, which calculator tool each operation needs.

    .venv/bin/python examples/calc/demo.py --seed 0

Everything is real, started by `lightningrl.fit` as separate processes: the store server (SQLite,
with its LLM proxy), our inference server and runner processes executing the plain-openai agent,
while LightningRL trains here with verl's actor update on CPU. Last line:
`held-out success: before 0.xx after 0.yy`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent import calc_agent  # noqa: E402
from rich.console import Console  # noqa: E402
from tasks import CalcTask, demonstrations, split_tasks, vocabulary  # noqa: E402

from lightningrl import fit  # noqa: E402
from lightningrl.advantages import AdvantageConfig, PolicyLossConfig  # noqa: E402
from lightningrl.config import LightningRLConfig  # noqa: E402
from lightningrl.tinylm import build_tiny_model  # noqa: E402
from lightningrl.trainer.config import TrainerConfig  # noqa: E402
from lightningrl.warmup import WarmupConfig, supervised_warmup  # noqa: E402


def as_rows(tasks: list[CalcTask]) -> list[dict]:
    return [{"task_id": t.task_id, "input": t.as_input(), "tags": {"op": t.op}} for t in tasks]


def demo_config(args: argparse.Namespace) -> LightningRLConfig:
    """The RL settings the demo's flags ask for (also read by replay_update.py)."""
    return LightningRLConfig(
        steps=args.steps,
        tasks_per_step=args.tasks_per_step,
        rollouts_per_task=args.n,
        val_every=args.val_every,
        balance_by="op",
        return_to_judged_calls=args.credit == "episode",
        seed=args.seed,
        deterministic=args.deterministic,
        async_rollouts=args.async_rollouts,
        advantage=AdvantageConfig(
            estimator="grpo",
            norm_by_std=args.std_norm,
            negative_weight=args.negative_weight,
            baseline=args.baseline,
        ),
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


def main(args: argparse.Namespace) -> None:
    console = Console(soft_wrap=True)
    started = time.perf_counter()
    out = Path(args.output).resolve() / f"seed{args.seed}"  # absolute: the store records checkpoint paths
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    train, heldout = split_tasks(args.seed)

    console.rule(f"[bold]LightningRL CPU demo: calculator agent, seed {args.seed}")
    if args.warmup_from:
        warm = shutil.copytree(args.warmup_from, out / "model-warmup")
        console.print(f"reusing the warmed-up model from {args.warmup_from}")
    else:
        base = build_tiny_model(
            out / "model-base",
            seed=args.seed,
            tokenizer_kind="word",
            extra_text=vocabulary(),
            hidden_size=args.hidden,
            num_layers=args.layers,
            num_heads=4,
            # vLLM reloads weights in place but keeps a tied output head's old weights
            tie_word_embeddings=args.engine != "vllm",
        )
        warm, losses = supervised_warmup(
            base,
            demonstrations(train, args.seed, 4000),
            out / "model-warmup",
            WarmupConfig(
                steps=args.warmup_steps,
                lr=args.warmup_lr,
                seed=args.seed,
                until_loss=args.warmup_until_loss,
                max_steps=args.warmup_max_steps,
            ),
            console=console,
        )
        console.print(
            f"built the tiny model and warmed it up on random-tool demonstrations "
            f"({len(losses)} steps, loss {losses[-1]:.3f})"
        )

    config = demo_config(args)
    result = fit(
        calc_agent,
        as_rows(train),
        as_rows(heldout),
        model=warm,
        config=config,
        workers=args.workers,
        engine=args.engine,
        output_dir=out,
        console=console,
    )
    wall = time.perf_counter() - started
    validations = [r for r in result.metrics if "val/success" in r]
    before, after = validations[0], validations[-1]
    for label, row in (("before", before), ("after", after)):
        slices = {
            k[len("val/success[") : -1]: round(v, 2) for k, v in row.items() if k.startswith("val/success[")
        }
        console.print(f"held-out success {label} RL: {row['val/success']:.2f}  {slices}", markup=False)
    console.print(f"metrics: {result.metrics_csv}   reward curve: {result.reward_curve}", markup=False)
    print(
        f"held-out success: before {before['val/success']:.2f} after {after['val/success']:.2f} "
        f"(seed {args.seed}, {result.steps} RL steps, {wall:.0f} s wall)"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return demo_parser().parse_args(argv)


def demo_parser(description: str | None = __doc__) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="runs/calc")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--tasks-per-step", type=int, default=12)
    p.add_argument("--n", type=int, default=8, help="rollouts per task (GRPO group size)")
    p.add_argument("--val-every", type=int, default=20)
    p.add_argument("--lr", type=float, default=1.5e-4)
    p.add_argument("--workers", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--warmup-steps", type=int, default=300)
    p.add_argument("--warmup-lr", type=float, default=3e-3)
    p.add_argument(
        "--warmup-until-loss",
        type=float,
        default=0.13,
        help="after --warmup-steps, go on until the mean loss of 30 steps is this low (the random tool "
        "choice leaves ~0.12): some seeds learn to copy numbers late",
    )
    p.add_argument("--warmup-max-steps", type=int, default=900)
    p.add_argument(
        "--warmup-from", default=None, help="reuse a warmed-up model directory (skips the warm-up)"
    )
    p.add_argument("--loss-agg", default="token-mean", help="verl loss aggregation mode")
    p.add_argument("--mini-batch", type=int, default=24, help="sequences per optimiser step")
    p.add_argument("--ppo-epochs", type=int, default=4)
    p.add_argument("--lr-schedule", choices=["constant", "cosine"], default="cosine")
    p.add_argument("--min-lr-ratio", type=float, default=0.3, help="cosine floor as a fraction of --lr")
    p.add_argument(
        "--std-norm",
        action="store_true",
        help="GRPO's std normalisation (default: Dr.GRPO, no division by the group's std; see README)",
    )
    p.add_argument(
        "--credit",
        choices=["steps", "episode"],
        default="steps",
        help="steps: the answer call is valued by the agent's own step judgement; episode: every call "
        "gets the final reward (the answer is then blamed for a wrong tool)",
    )
    p.add_argument(
        "--baseline",
        choices=["group_and_call", "group"],
        default="group_and_call",
        help="GRPO baseline: the same call of sibling rollouts, or every call of the task's rollouts",
    )
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="same seed, same metrics: rollouts named by step and task, each call's sampling seeded",
    )
    p.add_argument(
        "--engine",
        choices=["ours", "vllm", "auto"],
        default="ours",
        help="inference engine: ours, or vLLM from .venv-vllm (scripts/setup-vllm); the model is then untied",
    )
    p.add_argument("--kl-coef", type=float, default=0.0, help="verl KL loss to the warmed-up model (0: off)")
    p.add_argument(
        "--negative-weight",
        type=float,
        default=0.5,
        help="scale of negative advantages (see README: an early collapse)",
    )
    p.add_argument(
        "--async-rollouts",
        action="store_true",
        help="collect step k+1's rollouts while step k trains (one step off-policy)",
    )
    p.add_argument("--trainer", choices=["local", "ray"], default="local", help="trainer backend")
    p.add_argument("--trainer-workers", type=int, default=1, help="actor ranks of the ray trainer")
    return p


if __name__ == "__main__":
    main(parse_args())
