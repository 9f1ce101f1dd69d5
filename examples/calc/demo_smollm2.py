"""The calculator agent in its natural form on a real pretrained model, SmolLM2-135M-Instruct, on CPU.

    .venv/bin/python examples/calc/demo_smollm2.py --seed 0                       # plain openai client
    .venv/bin/python examples/calc/demo_smollm2.py --seed 0 --framework autogen   # AutoGen AgentChat

The agent (`agent.calc_tools_agent`, a plain openai client) offers add, sub and mul as OpenAI
functions (`tools=`), runs the model's tool call, sends its result back as a `tool` message and takes
the reply's last number as the answer; no thought before the call. Our inference server renders the
tools into SmolLM2's ChatML prompt and parses its `<tool_call>` blocks back into `tool_calls`
(docs/serving.md). The instruct model never calls a tool on its own (held-out 0.00), so a short
supervised warm-up first teaches the call format with the tool picked at random: it carries no
information about which tool an operation needs, which RL then has to learn (each tool equally often:
a skewed draw can leave one tool the choice for every question, and then no group disagrees). GRPO
groups of 8 rollouts a task by default (the weakest seed: +0.16 with 4, +0.28 with 8).

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
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent import calc_tools_agent  # noqa: E402
from tasks import CalcTask, tool_demonstrations, two_digit_split  # noqa: E402

from lightningrl.demos.real_model import (  # noqa: E402
    RealModelDefaults,
    add_real_model_flags,
    run_real_model_demo,
)

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


def main(args: argparse.Namespace) -> None:
    train, heldout = two_digit_split(args.seed, args.heldout_per_op)
    agent, demo_form = framework_agent(args.framework)

    def demonstrations(count: int) -> list[tuple]:
        return tool_demonstrations(
            train, args.seed, count, random_tool=args.warmup_demos == "random", **demo_form
        )

    run_real_model_demo(
        f"calculator agent with tools ({args.framework})",
        agent,
        as_rows(train),
        as_rows(heldout),
        demonstrations,
        args,
        balance_by="op",
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--framework",
        choices=["openai", "autogen"],
        default="openai",
        help="the agent: plain openai or AutoGen",
    )
    p.add_argument("--heldout-per-op", type=int, default=40)
    add_real_model_flags(p, RealModelDefaults(output="runs/calc-smollm2", n=8, tasks_per_step=3))
    return p.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
