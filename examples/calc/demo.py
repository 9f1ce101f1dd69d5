"""The CPU demo: a tiny model learns, with RL, which calculator tool each operation needs.

    .venv/bin/python examples/calc/demo.py --seed 0

Everything is real, started by `lightningrl.fit` as separate processes: the store server (SQLite,
with its LLM proxy), our inference server and runner processes executing the plain-openai agent,
while LightningRL trains here with verl's actor update on CPU. Last line:
`held-out success: before 0.xx after 0.yy`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent import calc_agent  # noqa: E402
from rich.console import Console  # noqa: E402
from tasks import SYSTEM, CalcTask, demonstrations, split_tasks, vocabulary  # noqa: E402

from lightningrl import fit  # noqa: E402
from lightningrl.demos.flags import (  # noqa: E402
    DemoDefaults,
    demo_argument_parser,
    demo_rl_config,
    demo_warmup_config,
    fresh_run_dir,
    report_heldout,
)
from lightningrl.demos.tinylm import build_tiny_model  # noqa: E402
from lightningrl.demos.warmup import supervised_warmup  # noqa: E402
from lightningrl.rl.config import LightningRLConfig  # noqa: E402


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
    out = fresh_run_dir(args.output, f"seed{args.seed}")
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
    # SFT's update is NLL only for one optimiser step on a batch scored by its own weights.
    sft = {"trainer": {"mini_batch_size": None, "ppo_epochs": 1}} if args.algorithm == "sft" else None
    with optimizer_server(out, args.algorithm == "apo") as optimizer_url:
        result = _fit(args, console, out, warm, train, heldout, config, sft, optimizer_url)
    report_heldout(result, started, args.seed, console)


@contextlib.contextmanager
def optimizer_server(out: Path, wanted: bool) -> Iterator[str | None]:
    """APO's optimizer: the real SmolLM2-135M-Instruct on our inference server (one thread), as a child."""
    if not wanted:
        yield None
        return
    from lightningrl.models import cached_model
    from lightningrl.processes.supervisor import Supervisor, child_env, cli_command
    from lightningstore.server.run import free_port

    port = free_port()
    command = cli_command(
        "serve-model", "--checkpoint", str(cached_model("smollm2")), "--port", str(port),
        "--served-model-name", "smollm2", "--cpu-threads", "1",
    )  # fmt: skip
    with Supervisor(out / "logs-optimizer") as supervisor:
        child = supervisor.start("optimizer", command, env=child_env())
        asyncio.run(supervisor.wait_http(child, f"http://127.0.0.1:{port}/healthz", timeout=300))
        yield f"http://127.0.0.1:{port}/v1"


def _fit(args, console, out, warm, train, heldout, config, sft, optimizer_url):
    apo = None
    if optimizer_url is not None:
        apo = {
            "optimizer_model": "openai/smollm2", "optimizer_base_url": optimizer_url, "rounds": 2, "beam": 2,
            "rollouts_per_task": 2, "optimizer_max_tokens": 96, "score_on": "train", "score_tasks": 32,
        }  # fmt: skip
    return fit(
        calc_agent,
        as_rows(train),
        as_rows(heldout),
        model=warm,
        config=config,
        workers=args.workers,
        engine=args.engine,
        output_dir=out,
        console=console,
        algorithm=args.algorithm,
        sft=sft,
        apo=apo,
        prompt=SYSTEM if apo is not None else None,
    )


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
        "--algorithm",
        choices=["rl", "sft", "apo"],
        default="rl",
        help="rl: LightningRL; sft: fine-tuning on the successful rollouts, same steps and rollouts; apo: "
        "the system prompt optimized (2 rounds, beam 2) by SmolLM2-135M-Instruct as the optimizer, weights kept",
    )
    p.add_argument(
        "--async-rollouts",
        action="store_true",
        help="collect step k+1's rollouts while step k trains (one step off-policy)",
    )
    return p


if __name__ == "__main__":
    main(parse_args())
