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
from lightningrl.config import LightningRLConfig  # noqa: E402
from lightningrl.demo_flags import (  # noqa: E402
    DemoDefaults,
    demo_argument_parser,
    demo_rl_config,
    demo_warmup_config,
    report_heldout,
)
from lightningrl.tinylm import build_tiny_model  # noqa: E402
from lightningrl.warmup import supervised_warmup  # noqa: E402


def as_rows(tasks: list[CalcTask]) -> list[dict]:
    return [{"task_id": t.task_id, "input": t.as_input(), "tags": {"op": t.op}} for t in tasks]


def demo_config(args: argparse.Namespace) -> LightningRLConfig:
    """The RL settings the demo's flags ask for (also read by replay_update.py)."""
    return demo_rl_config(
        args,
        balance_by="op",
        return_to_judged_calls=args.credit == "episode",
        async_rollouts=args.async_rollouts,
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
            demo_warmup_config(args),
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
    report_heldout(result, started, args.seed, console)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return demo_parser().parse_args(argv)


def demo_parser(description: str | None = __doc__) -> argparse.ArgumentParser:
    p = demo_argument_parser(
        description,
        # the random tool choice leaves a warm-up loss of ~0.12; some seeds learn to copy numbers late
        DemoDefaults(output="runs/calc", warmup_until_loss=0.13),
    )
    p.add_argument(
        "--credit",
        choices=["steps", "episode"],
        default="steps",
        help="steps: the answer call is valued by the agent's own step judgement; episode: every call "
        "gets the final reward (the answer is then blamed for a wrong tool)",
    )
    p.add_argument(
        "--engine",
        choices=["ours", "vllm", "auto"],
        default="ours",
        help="inference engine: ours, or vLLM from .venv-vllm (scripts/setup-vllm); the model is then untied",
    )
    p.add_argument(
        "--async-rollouts",
        action="store_true",
        help="collect step k+1's rollouts while step k trains (one step off-policy)",
    )
    return p


if __name__ == "__main__":
    main(parse_args())
