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
import os
import random
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # runner processes import the agent as examples.calc_autogen.agent

from rich.console import Console  # noqa: E402

from examples.calc_autogen.agent import (  # noqa: E402
    SYSTEM,
    calc_autogen_agent,
    calc_autogen_mcp_agent,
    openai_tools,
)
from examples.calc_autogen.tasks import CalcTask, demonstrations, split_tasks, vocabulary  # noqa: E402
from lightningrl import fit  # noqa: E402
from lightningrl.demos.flags import (  # noqa: E402
    DemoDefaults,
    demo_argument_parser,
    demo_rl_config,
    fresh_run_dir,
    report_heldout,
)
from lightningrl.demos.tinylm import build_tiny_model  # noqa: E402
from lightningrl.demos.two_phase import add_two_phase_flags, two_phase_warmup  # noqa: E402


def as_rows(tasks: list[CalcTask]) -> list[dict]:
    return [{"task_id": t.task_id, "input": t.as_input(), "tags": {"op": t.op}} for t in tasks]


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
    demos = demonstrations(train, args.seed, 4000, SYSTEM, tools)  # the tool picked at random in each
    return two_phase_warmup(
        base,
        None,  # phase 1 without the tool listing (~80 tokens): the copies emerge cheaply
        demos,  # AutoGen's prompts: its tools listed in the first call's system turn
        out,
        args,
        console,
    )


def main(args: argparse.Namespace) -> None:
    console = Console(soft_wrap=True)
    started = time.perf_counter()
    out = fresh_run_dir(args.output, f"{args.tools}-seed{args.seed}")
    train, heldout = split_tasks(args.seed)
    console.rule(
        f"[bold]LightningRL CPU demo: AutoGen calculator agent ({args.tools} tools), seed {args.seed}"
    )
    warm = warm_model(args, out, train, console)

    config = demo_rl_config(args, balance_by="op", return_to_judged_calls=False)
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
    report_heldout(result, started, args.seed, console)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = demo_argument_parser(
        __doc__,
        # the random tool choice leaves a phase-1 loss of ~0.035; copying numbers is learned late.
        # 20 steps: held-out 0.25 -> 0.99 in the first run (a step costs ~22 s)
        DemoDefaults(output="runs/calc_autogen", steps=20, val_every=10, warmup_until_loss=0.06),
    )
    p.add_argument("--tools", choices=["python", "mcp"], default="python", help="Python functions or MCP")
    p.add_argument(
        "--val-tasks",
        type=int,
        default=0,
        help="validate on this many held-out tasks, sampled by seed (0: all 180)",
    )
    p.add_argument("--runner-processes", type=int, default=None)
    add_two_phase_flags(p)
    return p.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
