"""`lightningrl data probe`: the starting policy's pass rate per train task; keep the mixed ones."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lightningrl.curation import Curation


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("data", help="train data: pass-rate curation")
    actions = parser.add_subparsers(dest="data_command", required=True)
    p = actions.add_parser(
        "probe",
        help="roll out the starting policy k times per train task; keep the tasks solved sometimes",
        description="Starts the store server, an inference server and runners as fit does, runs k "
        "train-mode rollouts of every task in --train, prints pass rates per slice, and writes the tasks "
        "solved sometimes (every task when none is) to --out, as the lines of --train they came from.",
    )
    agent = p.add_mutually_exclusive_group(required=True)
    agent.add_argument("--agent", help="module:function, module:LitAgentClass or path/to/script.py:function")
    agent.add_argument("--command", help="instead of --agent: a command line run once per rollout")
    p.add_argument("--train", required=True, type=Path, help="train tasks: a JSONL file")
    p.add_argument("--model", required=True, help="the starting checkpoint: a Hugging Face model directory")
    p.add_argument("--out", required=True, type=Path, help="where the kept tasks go (JSONL)")
    p.add_argument("-k", type=int, default=8, help="rollouts per task (default 8)")
    p.add_argument("--slice-by", help="a task field to report pass rates by (e.g. op)")
    p.add_argument(
        "--success-threshold", type=float, default=1.0, help="a pass: reward >= this (default 1.0)"
    )
    p.add_argument("--workers", type=int, default=8, help="concurrent rollouts (default 8)")
    p.add_argument("--runner-processes", type=int, help="runner processes (default min(workers, CPUs))")
    p.add_argument("--engine", default="auto", help="inference engine: ours, vllm or auto")
    p.add_argument("--store", help="store (default: output_dir/store.db)")
    p.add_argument("--output-dir", type=Path, default=Path("runs/probe"), help="logs and the default store")
    p.set_defaults(func=_probe)


def kept_lines(train: Path, curation: Curation, slice_by: str | None) -> list[str]:
    """The lines of `train` whose tasks the curation keeps, in file order."""
    from lightningrl.datasets import load_tasks

    lines = [line for line in train.read_text().splitlines() if line.strip()]
    tasks = load_tasks(train, what="train", tag_fields=[slice_by] if slice_by else [])
    kept = {t.task_id for t in curation.kept}
    return [line for line, task in zip(lines, tasks, strict=True) if task.task_id in kept]


def _probe(args: argparse.Namespace) -> int:
    from lightningrl.fitting.run import fit
    from lightningrl.serving.vllm import VllmUnavailable

    try:
        if args.k < 1:
            raise ValueError(f"-k must be >= 1, got {args.k}")
        if args.out.resolve() == args.train.resolve():
            raise ValueError(f"--out must differ from --train, got {str(args.out)!r} for both")
        config = {"success_threshold": args.success_threshold, "balance_by": args.slice_by}
        result = fit(
            args.agent or shlex.split(args.command),
            args.train,
            model=args.model,
            config=config,
            store=args.store,
            workers=args.workers,
            runner_processes=args.runner_processes,
            engine=args.engine,
            output_dir=args.output_dir,
            algorithm=[],
            probe=args.k,
        )
    except (ValueError, TypeError, FileNotFoundError, NotImplementedError, VllmUnavailable) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: every process the probe started is stopped", file=sys.stderr)
        return 130
    lines = kept_lines(args.train, result.probe, args.slice_by)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(line + "\n" for line in lines))
    print(f"wrote {len(lines)} tasks to {args.out}", flush=True)
    return 0
