"""The OpenAI Agents SDK retrieval agent in its natural form on a real pretrained model, SmolLM2-135M-Instruct, on CPU.

    .venv/bin/python examples/rag/demo_smollm2.py --seed 0
    .venv/bin/python examples/rag/demo_smollm2.py --seed 0 --warmup-steps 0 --steps 1   # the instruct model

The agent is `agent.rag_natural_agent`: an Agents SDK `Agent` with two `@function_tool` BM25 searches
(`search_companies`, `search_people`), plain instructions (answer in one word, search for the facts),
up to 4 model calls; one- and two-hop questions. A short supervised warm-up first teaches the call
format and copying the last sentence's fact into the answer, with the collection of every search
picked AT RANDOM: which collection a question's hop needs is left to RL. Train: every question of 16
generated worlds (facts); held-out: every question of 3 other worlds (144: the same names with other
founders and birthplaces, so an answer is found by searching, never remembered), greedy, with success
per question kind. Last line: `held-out success: before X after Y (seed S, N RL steps, W s wall)`,
before = after the warm-up.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: `examples.rag`

from examples.rag.agent import rag_natural_agent  # noqa: E402
from examples.rag.tasks import RagTask, natural_demonstrations, natural_split  # noqa: E402
from lightningrl.demos.real_model import (  # noqa: E402
    RealModelDefaults,
    add_real_model_flags,
    run_real_model_demo,
)


def as_rows(tasks: list[RagTask]) -> list[dict]:
    return [
        {"task_id": f"w{t.world}-{t.task_id}", "input": t.as_input(), "tags": {"kind": t.kind}} for t in tasks
    ]


def main(args: argparse.Namespace) -> None:
    train, heldout = natural_split(args.seed)
    random.Random(args.seed).shuffle(train)  # --train-tasks and --heldout keep a mix of worlds and kinds
    random.Random(args.seed + 1).shuffle(heldout)

    def demonstrations(count: int) -> list[tuple]:
        random_collection = args.warmup_demos == "random"
        return natural_demonstrations(train, args.seed, count, random_collection=random_collection)

    run_real_model_demo(
        "retrieval agent (OpenAI Agents SDK)",
        rag_natural_agent,
        as_rows(train),
        as_rows(heldout[: args.heldout]),
        demonstrations,
        args,
        balance_by="kind",
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heldout", type=int, default=144, help="held-out tasks (144: all of them)")
    add_real_model_flags(p, RealModelDefaults(output="runs/rag-smollm2", warmup_steps=16, tasks_per_step=6))
    return p.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
