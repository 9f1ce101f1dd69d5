"""The AutoGen demo: a tiny model learns, with RL, which calculator tool each operation needs, while an
AutoGen `AssistantAgent` calls the tools by function calling.

    .venv/bin/python examples/calc_autogen/demo.py --seed 0              # tools: Python functions
    .venv/bin/python examples/calc_autogen/demo.py --seed 0 --tools mcp  # the same tools over MCP

`lightningrl.fit` starts the store server (SQLite, with its LLM proxy), our inference server and runner
processes executing the agent (`agent.py`), and trains here with verl's actor update on CPU. Last line:
`held-out success: before 0.xx after 0.yy (seed S, N RL steps, W s wall)`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # runner processes import the agent as examples.calc_autogen.agent

from rich.console import Console  # noqa: E402

from examples.calc_autogen.agent import (  # noqa: E402
    SYSTEM,
    calc_autogen_agent,
    calc_autogen_mcp_agent,
    mcp_server_params,
)
from examples.calc_autogen.tasks import CalcTask, demonstrations, split_tasks, vocabulary  # noqa: E402
from examples.calc_autogen.tools import add, mul, sub  # noqa: E402
from lightningrl import fit  # noqa: E402
from lightningrl.advantages import AdvantageConfig, PolicyLossConfig  # noqa: E402
from lightningrl.config import LightningRLConfig  # noqa: E402
from lightningrl.tinylm import build_tiny_model  # noqa: E402
from lightningrl.trainer.config import TrainerConfig  # noqa: E402
from lightningrl.warmup import WarmupConfig, supervised_warmup  # noqa: E402


def openai_tools(kind: str) -> list[dict[str, Any]]:
    """The `tools` AutoGen sends with the agent's first call, converted exactly as its client does."""
    from autogen_core.tools import FunctionTool
    from autogen_ext.models.openai._openai_client import convert_tools
    from autogen_ext.tools.mcp import McpWorkbench

    if kind == "python":  # AssistantAgent wraps a function with its docstring as the description
        schemas: list[Any] = [FunctionTool(f, description=f.__doc__ or "") for f in (add, sub, mul)]
    else:

        async def listed() -> list[Any]:
            async with McpWorkbench(mcp_server_params()) as workbench:
                return list(await workbench.list_tools())

        schemas = asyncio.run(listed())
    return [dict(tool) for tool in convert_tools(schemas)]


def as_rows(tasks: list[CalcTask]) -> list[dict]:
    return [{"task_id": t.task_id, "input": t.as_input(), "tags": {"op": t.op}} for t in tasks]


def warmup_phase1(args: argparse.Namespace, out: Path, base: Path, demos: list, console: Console) -> Path:
    # Phase 1, cheap: the format and the copying, on the prompts without the ~300-token tool listing
    # (copying numbers emerges suddenly after a few hundred steps; at ~80 tokens a step costs 1/5).
    short, losses = supervised_warmup(
        base,
        [(messages, completion) for messages, completion, *_ in demos],
        out / "model-warmup-short",
        WarmupConfig(
            steps=args.warmup_steps,
            lr=args.warmup_lr,
            seed=args.seed,
            until_loss=args.warmup_until_loss,
            max_steps=args.warmup_max_steps,
        ),
        console=console,
    )
    console.print(f"warm-up phase 1 (no tool listing): {len(losses)} steps, loss {losses[-1]:.3f}")
    return short


def warm_model(args: argparse.Namespace, out: Path, train: list[CalcTask], console: Console) -> Path:
    """The tiny model, warmed up on the agent's exact prompts with the tool picked at random."""
    if args.warmup_from:
        console.print(f"reusing the warmed-up model from {args.warmup_from}")
        return Path(shutil.copytree(args.warmup_from, out / "model-warmup"))
    tools = openai_tools(args.tools)
    base = build_tiny_model(
        out / "model-base",
        seed=args.seed,
        tokenizer_kind="word",
        extra_text=vocabulary(SYSTEM, tools),
        hidden_size=args.hidden,
        num_layers=args.layers,
        num_heads=4,
    )
    demos = demonstrations(train, args.seed, 4000, SYSTEM, tools)
    if args.warmup_phase1_from:
        short = Path(shutil.copytree(args.warmup_phase1_from, out / "model-warmup-short"))
        console.print(f"reusing phase 1 of the warm-up from {args.warmup_phase1_from}")
    else:
        short = warmup_phase1(args, out, base, demos, console)
    # Phase 2: the agent's exact prompts (AutoGen's tools listed in the first call's system turn).
    warm, losses = supervised_warmup(
        short,
        demos,
        out / "model-warmup",
        WarmupConfig(steps=args.warmup_tools_steps, batch_size=16, lr=args.warmup_lr / 3, seed=args.seed),
        console=console,
    )
    console.print(
        f"warm-up phase 2 (AutoGen's prompts): {len(losses)} steps, loss {losses[-1]:.3f}; the tool is "
        "picked at random in every demonstration"
    )
    return warm


def main(args: argparse.Namespace) -> None:
    console = Console(soft_wrap=True)
    started = time.perf_counter()
    out = Path(args.output).resolve() / f"{args.tools}-seed{args.seed}"  # absolute: the store records paths
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    train, heldout = split_tasks(args.seed)
    console.rule(
        f"[bold]LightningRL CPU demo: AutoGen calculator agent ({args.tools} tools), seed {args.seed}"
    )
    warm = warm_model(args, out, train, console)

    config = LightningRLConfig(
        steps=args.steps,
        tasks_per_step=args.tasks_per_step,
        rollouts_per_task=args.n,
        val_every=args.val_every,
        balance_by="op",
        return_to_judged_calls=False,
        seed=args.seed,
        advantage=AdvantageConfig(estimator="grpo", norm_by_std=False, baseline="group_and_call"),
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
        calc_autogen_mcp_agent if args.tools == "mcp" else calc_autogen_agent,
        as_rows(train),
        as_rows(random.Random(args.seed).sample(heldout, args.val_tasks) if args.val_tasks else heldout),
        model=warm,
        config=config,
        workers=args.workers,
        engine="ours",
        runner_processes=args.runner_processes,
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
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tools", choices=["python", "mcp"], default="python", help="Python functions or MCP")
    p.add_argument("--output", default="runs/calc_autogen")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--tasks-per-step", type=int, default=8)
    p.add_argument("--n", type=int, default=8, help="rollouts per task (GRPO group size)")
    p.add_argument("--val-every", type=int, default=10)
    p.add_argument(
        "--val-tasks",
        type=int,
        default=0,
        help="validate on this many held-out tasks, sampled by seed (0: all 180)",
    )
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--workers", type=int, default=32)
    p.add_argument("--runner-processes", type=int, default=None)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--warmup-steps", type=int, default=300)
    p.add_argument("--warmup-lr", type=float, default=3e-3)
    p.add_argument(
        "--warmup-until-loss",
        type=float,
        default=0.06,
        help="after --warmup-steps, go on until the mean loss of 30 steps is this low (the random tool "
        "leaves ~0.035): copying the numbers is learned late, at a different step for each seed",
    )
    p.add_argument(
        "--warmup-phase1-from", default=None, help="reuse phase 1 of the warm-up (a model directory)"
    )
    p.add_argument("--warmup-tools-steps", type=int, default=60, help="phase 2: steps on the exact prompts")
    p.add_argument("--warmup-max-steps", type=int, default=900)
    p.add_argument(
        "--warmup-from", default=None, help="reuse a warmed-up model directory (skips the warm-up)"
    )
    p.add_argument("--mini-batch", type=int, default=24, help="sequences per optimiser step")
    p.add_argument("--ppo-epochs", type=int, default=4)
    return p.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
