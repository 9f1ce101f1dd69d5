"""The CPU demo: a tiny model learns, with RL, which calculator tool each operation needs.

    .venv/bin/python examples/calc/demo.py --seed 0

Everything is real and in one process: a SQLite LightningStore, the store server with its LLM
proxy, our inference server, a Runner executing the plain-openai agent, and LightningRL training
with verl's actor update on CPU. Last line: `held-out success: before 0.xx after 0.yy`.
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

from agent import calc_agent  # noqa: E402
from rich.console import Console  # noqa: E402
from tasks import CalcTask, demonstrations, split_tasks, vocabulary  # noqa: E402

from algorithm import Evaluate, Task  # noqa: E402
from lightningrl.advantages import AdvantageConfig, PolicyLossConfig  # noqa: E402
from lightningrl.config import LightningRLConfig  # noqa: E402
from lightningrl.local_stack import local_stack  # noqa: E402
from lightningrl.loop import LightningRL  # noqa: E402
from lightningrl.tinylm import build_tiny_model  # noqa: E402
from lightningrl.trainer.config import TrainerConfig  # noqa: E402
from lightningrl.warmup import WarmupConfig, supervised_warmup  # noqa: E402
from lightningstore import LLM, SqlStore  # noqa: E402

MODEL_NAME = "calc-tiny"


def as_tasks(tasks: list[CalcTask]) -> list[Task]:
    return [Task(task_id=t.task_id, input=t.as_input(), tags={"op": t.op}) for t in tasks]


async def main(args: argparse.Namespace) -> None:
    from runner import Runner

    console = Console()
    started = time.perf_counter()
    out = Path(args.output) / f"seed{args.seed}"
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
        )
        warm, losses = supervised_warmup(
            base,
            demonstrations(train, args.seed, 4000),
            out / "model-warmup",
            WarmupConfig(steps=args.warmup_steps, lr=args.warmup_lr, seed=args.seed),
        )
        console.print(
            f"built the tiny model and warmed it up on random-tool demonstrations (loss {losses[-1]:.3f})"
        )

    store = SqlStore(out / "store.db")
    async with local_stack(store, warm, model_name=MODEL_NAME, cpu_threads=args.cpu_threads) as urls:
        llm = LLM(
            endpoints=[urls.model_v1],
            model=MODEL_NAME,
            checkpoint=str(warm),
            sampling={"temperature": 1.0, "top_p": 1.0},
            # held-out success is measured as sampled at the training temperature (pass@1 with sampling)
            sampling_by_mode={"val": {"temperature": 1.0, "top_p": 1.0}, "test": {"temperature": 0.0}},
        )
        await store.add_resource_version("llm", llm, created_by="demo", artifact=str(warm))
        runner = Runner(store, calc_agent, workers=args.workers, proxy_url=urls.proxy, show_progress=False)
        runner_task = asyncio.create_task(runner.run())
        config = LightningRLConfig(
            steps=args.steps,
            tasks_per_step=args.tasks_per_step,
            rollouts_per_task=args.n,
            val_every=args.val_every,
            balance_by="op",
            output_dir=out,
            seed=args.seed,
            advantage=AdvantageConfig(estimator="grpo", negative_weight=args.negative_weight),
            trainer=TrainerConfig(
                lr=args.lr,
                micro_batch_size=64,
                mini_batch_size=args.mini_batch,
                ppo_epochs=args.ppo_epochs,
                shuffle=True,
                seed=args.seed,
                loss=PolicyLossConfig(loss_agg_mode=args.loss_agg),
            ),
        )
        heldout_tasks = as_tasks(heldout)
        rl = LightningRL(store, as_tasks(train), heldout_tasks, config, console=console)
        before_version = (await store.get_latest_version("llm")).version_id
        before_set = await store.add_resource_set({"llm": before_version})
        before = await Evaluate(
            store,
            heldout_tasks,
            resources_id=before_set.resources_id,
            n=1,
            mode="val",
            group_prefix="before/",
        ).run()
        console.print(f"held-out success before RL: {before.success_rate:.2f}  {before.by_tag}")
        metrics = await rl.run()
        after = await rl.evaluate(heldout_tasks, group_prefix="after/")
        runner.stop()
        await asyncio.wait_for(runner_task, timeout=60)
    await store.close()
    wall = time.perf_counter() - started
    console.print(f"held-out success after RL: {after.success_rate:.2f}  {after.by_tag}")
    console.print(
        f"metrics: {out / 'metrics.csv'}   reward curve: {out / 'reward_curve.png'}   steps: {len(metrics.rows)}"
    )
    print(
        f"held-out success: before {before.success_rate:.2f} after {after.success_rate:.2f} "
        f"(seed {args.seed}, {wall:.0f} s wall)"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="runs/calc")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--tasks-per-step", type=int, default=9)
    p.add_argument("--n", type=int, default=8, help="rollouts per task (GRPO group size)")
    p.add_argument("--val-every", type=int, default=10)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--workers", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--warmup-steps", type=int, default=900)
    p.add_argument("--warmup-lr", type=float, default=3e-3)
    p.add_argument("--cpu-threads", type=int, default=1)
    p.add_argument(
        "--warmup-from", default=None, help="reuse a warmed-up model directory (skips the warm-up)"
    )
    p.add_argument("--loss-agg", default="token-mean", help="verl loss aggregation mode")
    p.add_argument(
        "--mini-batch", type=int, default=None, help="sequences per optimiser step (None: the batch)"
    )
    p.add_argument("--ppo-epochs", type=int, default=1)
    p.add_argument("--negative-weight", type=float, default=0.25, help="scale of negative advantages")
    return p.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
