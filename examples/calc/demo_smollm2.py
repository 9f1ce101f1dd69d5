"""The calculator agent in its natural form on a real pretrained model, SmolLM2-135M-Instruct, on CPU.

    .venv/bin/python examples/calc/demo_smollm2.py --seed 0                       # plain openai client
    .venv/bin/python examples/calc/demo_smollm2.py --seed 0 --framework autogen   # AutoGen AgentChat

The agent (`agent.calc_tools_agent`, a plain openai client) offers add, sub and mul as OpenAI
functions (`tools=`), runs the model's tool call, sends its result back as a `tool` message and takes
the reply's last number as the answer; no thought before the call. Our inference server renders the
tools into SmolLM2's ChatML prompt and parses its `<tool_call>` blocks back into `tool_calls`
(docs/serving.md). The instruct model never calls a tool on its own (held-out 0.00), so a short
supervised warm-up first teaches the call format with the tool picked at random: it carries no
information about which tool an operation needs, which RL then has to learn.

`--framework autogen` trains an AutoGen `AssistantAgent` instead, with AutoGen's defaults
(`examples/calc_autogen/agent.calc_autogen_default_agent`): add, sub and mul as Python functions
that AutoGen turns into OpenAI tools, one model call, and the tool's result as the answer (no
reflection); its warm-up demonstrates that call with AutoGen's own tool schemas. Held-out: the same 120
unseen tasks for every seed (40 per operation), greedy. Last line:
`held-out success: before X after Y (seed S, N RL steps, W s wall)`, before = after the warm-up;
`--warmup-steps 0` measures the instruct model itself.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent import calc_tools_agent  # noqa: E402
from rich.console import Console  # noqa: E402
from tasks import CalcTask, tool_demonstrations, two_digit_split  # noqa: E402

from lightningrl import cached_model, fit  # noqa: E402
from lightningrl.demos.flags import (  # noqa: E402
    DEMO_ADVANTAGE,
    add_advantage_flags,
    advantage_config,
    fresh_run_dir,
    report_heldout,
)
from lightningrl.demos.warmup import WarmupConfig, supervised_warmup  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def framework_agent(framework: str) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The agent, and how its warm-up demonstrates a call: (agent, tool_demonstrations' keywords)."""
    if framework == "openai":
        return calc_tools_agent, {}
    sys.path.insert(0, str(ROOT))  # runner processes import it as examples.calc_autogen.agent
    from examples.calc_autogen.agent import DEFAULT_SYSTEM, calc_autogen_default_agent, openai_tools

    return calc_autogen_default_agent, {
        "system": DEFAULT_SYSTEM,
        "tools": openai_tools("python"),
        "answers": False,
    }


def as_rows(tasks: list[CalcTask]) -> list[dict]:
    return [{"task_id": t.task_id, "input": t.as_input(), "tags": {"op": t.op}} for t in tasks]


def rl_config(args: argparse.Namespace) -> dict:
    """One full fine-tune update a batch, token-mean, with the toy demos' GRPO by default (Dr.GRPO, each
    call against its siblings' same call, failures at half weight: `DEMO_ADVANTAGE`); the advantage and KL
    flags try others (`--std-norm --baseline group --negative-weight 1` is the 2026-12-04 setting that
    collapsed seeds 1 and 2)."""
    return {
        "steps": args.steps,
        "tasks_per_step": args.tasks_per_step,
        "rollouts_per_task": args.n,
        "val_every": args.val_every or args.steps,
        "seed": args.seed,
        "balance_by": "op",
        "advantage": dataclasses.asdict(advantage_config(args)),
        "trainer": {
            "loss": {"kl_loss_coef": args.kl_coef},
            "lr": args.lr,
            "micro_batch_size": args.micro_batch,
            "mini_batch_size": None,
            "ppo_epochs": 1,
        },
    }


def main(args: argparse.Namespace) -> None:
    console = Console(soft_wrap=True)
    started = time.perf_counter()
    out = fresh_run_dir(args.output, f"seed{args.seed}")
    train, heldout = two_digit_split(args.seed, args.heldout_per_op)
    agent, demo_form = framework_agent(args.framework)
    console.rule(
        f"[bold]LightningRL on SmolLM2-135M-Instruct: calculator agent with tools ({args.framework}), seed {args.seed}"
    )
    model = cached_model("smollm2")
    if args.warmup_steps:
        model, losses = supervised_warmup(
            model,
            tool_demonstrations(
                train,
                args.seed,
                args.warmup_steps * args.warmup_batch,
                random_tool=args.warmup_demos == "random",
                **demo_form,
            ),
            out / "model-warmup",
            WarmupConfig(
                steps=args.warmup_steps, batch_size=args.warmup_batch, lr=args.warmup_lr, seed=args.seed
            ),
            console=console,
        )
        console.print(
            f"warmed up on {args.warmup_demos}-tool demonstrations ({len(losses)} steps, last loss {losses[-1]:.3f}, "
            f"{time.perf_counter() - started:.0f} s)"
        )
    result = fit(
        agent,
        as_rows(train[: args.train_tasks]),
        as_rows(heldout),
        model=model,
        config=rl_config(args),
        sampling_by_mode={"val": {"temperature": 0.0}},
        workers=args.workers,
        runner_processes=2,
        engine="ours",
        output_dir=out,
        console=console,
    )
    report_heldout(result, started, args.seed, console)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--framework",
        choices=["openai", "autogen"],
        default="openai",
        help="the agent: plain openai or AutoGen",
    )
    p.add_argument("--output", default="runs/calc-smollm2")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--tasks-per-step", type=int, default=4)
    p.add_argument("--n", type=int, default=4, help="rollouts per task (GRPO group size)")
    p.add_argument("--val-every", type=int, default=0, help="0: before the first step and after the last")
    p.add_argument("--lr", type=float, default=2e-5)
    add_advantage_flags(p, DEMO_ADVANTAGE)
    p.add_argument(
        "--micro-batch", type=int, default=4, help="sequences a forward/backward (8 of ~430 tokens: ~22 GB)"
    )
    p.add_argument("--workers", type=int, default=16, help="rollouts in flight")
    p.add_argument("--train-tasks", type=int, default=512, help="train tasks drawn from")
    p.add_argument("--heldout-per-op", type=int, default=40)
    p.add_argument("--warmup-steps", type=int, default=12, help="0: RL from the instruct model itself")
    p.add_argument("--warmup-batch", type=int, default=4)
    p.add_argument("--warmup-lr", type=float, default=5e-5)
    p.add_argument(
        "--warmup-demos",
        choices=["random", "correct"],
        default="random",
        help="random: the call format with a random tool (RL learns which); correct: the tool each operation needs",
    )
    return p.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
