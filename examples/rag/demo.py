"""The CPU demo: a tiny model learns, with RL, WHERE the Agents SDK retrieval agent should search.

    .venv/bin/python examples/rag/demo.py --seed 0

The warm-up teaches the format (hermes tool calls, one search per hop, the name to search, copying the
fact of the last sentence into the answer) with the collection to search (companies or people) picked
AT RANDOM at every hop; RL learns which one each question and hop needs. Everything runs as in
production, started by `lightningrl.fit`: the store server (SQLite, with its LLM proxy), our inference
server and runner processes executing the `agents.Agent`. Last line:
`held-out success: before 0.xx after 0.yy (...)`, success being the exact match of the final answer.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent import rag_agent  # noqa: E402
from rich.console import Console  # noqa: E402
from tasks import RagTask, demonstrations, split_tasks, vocabulary  # noqa: E402

from lightningrl import fit  # noqa: E402
from lightningrl.advantages import AdvantageConfig, PolicyLossConfig  # noqa: E402
from lightningrl.config import LightningRLConfig  # noqa: E402
from lightningrl.tinylm import build_tiny_model  # noqa: E402
from lightningrl.trainer.config import TrainerConfig  # noqa: E402
from lightningrl.warmup import WarmupConfig, supervised_warmup  # noqa: E402
from lightningstore import SqlStore  # noqa: E402


def as_rows(tasks: list[RagTask]) -> list[dict]:
    return [{"task_id": t.task_id, "input": t.as_input(), "tags": {"kind": t.kind}} for t in tasks]


async def held_out_f1(db: Path, step: int) -> float | None:
    """Mean token F1 of the validation rollouts of `step` (the agent's `f1` reward)."""
    store = SqlStore(db)
    try:
        rollouts = [
            r for r in await store.query_rollouts(mode="val") if (r.group_id or "").startswith(f"val{step}/")
        ]
        rewards = await store.query_rewards_many([r.rollout_id for r in rollouts])
    finally:
        await store.close()
    values = [x.value for rows in rewards.values() for x in rows if x.name == "f1"]
    return sum(values) / len(values) if values else None


def main(args: argparse.Namespace) -> None:
    console = Console(soft_wrap=True)
    started = time.perf_counter()
    out = Path(args.output).resolve() / f"seed{args.seed}"  # absolute: the store records checkpoint paths
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    world, train, heldout = split_tasks(args.seed)

    console.rule(f"[bold]LightningRL CPU demo: retrieval agent (OpenAI Agents SDK), seed {args.seed}")
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
        )
        warm, losses = supervised_warmup(
            base,
            demonstrations(world, train, args.seed, args.demos),
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
            f"built the tiny model and warmed it up on random-collection demonstrations "
            f"({len(losses)} steps, loss {losses[-1]:.3f})"
        )

    config = LightningRLConfig(
        steps=args.steps,
        tasks_per_step=args.tasks_per_step,
        rollouts_per_task=args.n,
        val_every=args.val_every,
        val_rollouts_per_task=args.val_repeats,
        balance_by="kind",
        return_to_judged_calls=False,
        seed=args.seed,
        advantage=AdvantageConfig(estimator="grpo", norm_by_std=args.std_norm, baseline="group_and_call"),
        trainer=TrainerConfig(
            lr=args.lr,
            micro_batch_size=64,
            mini_batch_size=args.mini_batch,
            lr_schedule="cosine",
            min_lr_ratio=0.3,
            total_training_steps=args.steps,
            ppo_epochs=args.ppo_epochs,
            shuffle=True,
            seed=args.seed,
            loss=PolicyLossConfig(loss_agg_mode="token-mean"),
        ),
    )
    result = fit(
        rag_agent,
        as_rows(train),
        as_rows(heldout),
        model=warm,
        config=config,
        workers=args.workers,
        engine="ours",
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
        score = asyncio.run(held_out_f1(out / "store.db", int(row["step"])))
        f1_text = f"{score:.2f}" if score is not None else "n/a"
        console.print(
            f"held-out exact match {label} RL: {row['val/success']:.2f}  F1 {f1_text}  {slices}", markup=False
        )
    console.print(f"metrics: {result.metrics_csv}   reward curve: {result.reward_curve}", markup=False)
    print(
        f"held-out success: before {before['val/success']:.2f} after {after['val/success']:.2f} "
        f"(seed {args.seed}, {result.steps} RL steps, {wall:.0f} s wall)"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="runs/rag")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--tasks-per-step", type=int, default=6)
    p.add_argument("--n", type=int, default=8, help="rollouts per task (GRPO group size)")
    p.add_argument("--val-every", type=int, default=10)
    p.add_argument("--val-repeats", type=int, default=4, help="rollouts per held-out question")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--demos", type=int, default=3000, help="warm-up questions (one demonstration per call)")
    p.add_argument("--warmup-steps", type=int, default=300)
    p.add_argument("--warmup-lr", type=float, default=3e-3)
    p.add_argument(
        "--warmup-until-loss",
        type=float,
        default=0.05,
        help="after --warmup-steps, go on until the mean loss of 30 steps is this low (the random "
        "collection choice leaves ~0.03): copying names is learned late",
    )
    p.add_argument("--warmup-max-steps", type=int, default=600)
    p.add_argument(
        "--warmup-from", default=None, help="reuse a warmed-up model directory (skips the warm-up)"
    )
    p.add_argument("--mini-batch", type=int, default=32, help="sequences per optimiser step")
    p.add_argument("--ppo-epochs", type=int, default=2)
    p.add_argument("--std-norm", action="store_true", help="GRPO's std normalisation (default: Dr.GRPO)")
    return p.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
