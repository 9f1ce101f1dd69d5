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
from tasks import RagTask, demonstrations, split_tasks, vocabulary, warmup_tasks  # noqa: E402

from lightningrl import fit  # noqa: E402
from lightningrl.demos.flags import (  # noqa: E402
    DemoDefaults,
    demo_argument_parser,
    demo_rl_config,
    fresh_run_dir,
    heldout_slices,
    report_heldout,
)
from lightningrl.demos.tinylm import build_tiny_model  # noqa: E402
from lightningrl.demos.two_phase import add_two_phase_flags, call_checks, two_phase_warmup  # noqa: E402
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
    out = fresh_run_dir(args.output, f"seed{args.seed}")
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
        # the collection picked at random at every hop: the format, the hops and the copies
        demos = demonstrations(warmup_tasks(args.seed), args.seed, args.demos)
        warm = two_phase_warmup(
            base,
            None,  # phase 1 without the tool listing: cheap
            demos,  # the SDK's requests, its two tools listed
            out,
            args,
            console,
            # the calls of the demo's own train questions: phase 1 goes on until they copy
            checks=call_checks(demonstrations(train, args.seed + 1, 32)),
        )

    config = demo_rl_config(
        args, val_rollouts_per_task=args.val_repeats, balance_by="kind", return_to_judged_calls=False
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

    def describe(label: str, row: dict) -> str:
        score = asyncio.run(held_out_f1(out / "store.db", int(row["step"])))
        f1_text = f"{score:.2f}" if score is not None else "n/a"
        return (
            f"held-out exact match {label} RL: {row['val/success']:.2f}  F1 {f1_text}  {heldout_slices(row)}"
        )

    report_heldout(result, started, args.seed, console, describe=describe)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = demo_argument_parser(
        __doc__,
        DemoDefaults(
            output="runs/rag",
            steps=20,
            tasks_per_step=6,
            val_every=10,
            lr=3e-4,
            workers=16,
            # the random collection choice leaves ~0.03; copying names is learned late
            warmup_until_loss=0.05,
            warmup_max_steps=1500,
            mini_batch=32,
            ppo_epochs=2,
            negative_weight=1.0,
        ),
    )
    p.add_argument("--val-repeats", type=int, default=4, help="rollouts per held-out question")
    add_two_phase_flags(p, until_copied=0.95, restarts=2)
    p.add_argument("--demos", type=int, default=3000, help="warm-up questions (one demonstration per call)")
    return p.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
