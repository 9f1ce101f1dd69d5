"""The LangGraph text-to-SQL agent in its natural form on a real pretrained model, SmolLM2-135M-Instruct, on CPU.

    .venv/bin/python examples/sql/demo_smollm2.py --seed 0
    .venv/bin/python examples/sql/demo_smollm2.py --seed 0 --warmup-steps 0 --steps 0   # the instruct model

The graph is `agent.sql_natural_agent`: a writer (`ChatOpenAI(...).bind_tools([list_tables,
describe_table, run_query])`, LangGraph's ToolNode runs its calls; a failed query gets one rewrite) and
a checker (approve or reject), one model. The writer's system message names the table and its columns
and asks for one query through `run_query`, as a user would write it; no thought before the call.
Only the writer's calls are trained (`agent_names`). A short supervised warm-up first teaches the
call format on train questions, with the aggregate picked AT RANDOM: which aggregate a question's
word asks for (highest, lowest, total, average) is left to RL. Held-out: every question of the
seed's held-out (column, aggregate) pairs, never asked in training (108), greedy, with success per
aggregate. Last line: `held-out success: before X after Y (seed S, N RL steps, W s wall)`, before =
after the warm-up.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: `examples.sql`

from examples.sql.agent import sql_natural_agent, tool_schemas  # noqa: E402
from examples.sql.tasks import SqlTask, natural_demonstrations, split_tasks  # noqa: E402
from lightningrl.demos.real_model import (  # noqa: E402
    RealModelDefaults,
    add_real_model_flags,
    run_real_model_demo,
)


def as_rows(tasks: list[SqlTask]) -> list[dict]:
    return [{"task_id": t.task_id, "input": t.as_input(), "tags": {"agg": t.aggregate}} for t in tasks]


def main(args: argparse.Namespace) -> None:
    train, heldout = split_tasks(args.seed)
    tools = tool_schemas()

    def demonstrations(count: int) -> list[tuple]:
        random_aggregate = args.warmup_demos == "random"
        return natural_demonstrations(train, tools, args.seed, count, random_aggregate=random_aggregate)

    run_real_model_demo(
        "text-to-SQL agent (LangGraph)",
        sql_natural_agent,
        as_rows(train),
        as_rows(heldout[: args.heldout]),
        demonstrations,
        args,
        balance_by="agg",
        agent_names=["writer"],
        return_to_judged_calls=False,  # the writer's calls are valued by the episode, not the checker
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heldout", type=int, default=108, help="held-out tasks (108: all of them)")
    add_real_model_flags(p, RealModelDefaults(output="runs/sql-smollm2"))
    return p.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
