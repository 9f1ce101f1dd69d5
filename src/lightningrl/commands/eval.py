"""`lightningrl eval`: an agent x a model x a rows file -> success per slice with 95%% intervals, pass@k."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate an agent on a model and a rows file: success per slice with 95%% intervals, pass@k",
        description="Starts the store server, an inference server and runners as fit does, rolls the agent "
        "out k times per row in the validation mode (the same call as fit's validation), prints success "
        "per slice with 95%% intervals and pass@1..k, and writes OUTPUT_DIR/eval.json; the rollouts and "
        "their spans stay in the store (lightningrl dashboard --store OUTPUT_DIR/store.db).",
    )
    agent = p.add_mutually_exclusive_group(required=True)
    agent.add_argument("--agent", help="module:function, module:LitAgentClass or path/to/script.py:function")
    agent.add_argument("--command", help="a command line run once per rollout")
    agent.add_argument("--agl-class", help="an Agent Lightning v1.0 class agent, module:Class")
    p.add_argument(
        "--env-map",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="with --command or --agl-class: Agent Lightning v1.0's env_map (e.g. QUESTION=input.question)",
    )
    p.add_argument("--rows", required=True, help="the rows to evaluate on: a JSONL file")
    model = p.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", help="a checkpoint directory")
    model.add_argument("--store", help="a store: its --version of the llm resource is evaluated")
    model.add_argument(
        "--endpoint", help="an OpenAI-compatible base URL served elsewhere (with --served-model)"
    )
    p.add_argument("--version", default="latest", help="with --store: latest, approved or a version id")
    p.add_argument("--served-model", help="with --endpoint: the model name it serves")
    p.add_argument(
        "--endpoint-key-env",
        metavar="NAME",
        help="with --endpoint: the environment variable holding its API key (e.g. OPENAI_API_KEY); the "
        "gateway sends it, the agent never sees it",
    )
    p.add_argument("-k", type=int, default=1, help="rollouts per row (default 1); pass@1..k is reported")
    p.add_argument("--slice-by", help="a row field to report success by (e.g. op)")
    p.add_argument(
        "--greedy", action="store_true", help="temperature 0 (default: fit's validation sampling, 0.7)"
    )
    p.add_argument("--success-threshold", type=float, default=1.0, help="a success: reward >= this")
    p.add_argument("--workers", type=int, default=8, help="concurrent rollouts (default 8)")
    p.add_argument("--runner-processes", type=int, help="runner processes (default min(workers, CPUs))")
    p.add_argument("--engine", default="auto", help="inference engine: ours, vllm or auto")
    p.add_argument("--output-dir", type=Path, default=Path("runs/eval"), help="eval.json, logs, the store")
    p.set_defaults(func=_eval)


def _eval(args: argparse.Namespace) -> int:
    from lightningrl.evaluating import evaluate
    from lightningrl.evaluation import REPORT_FILE, ServedModel
    from lightningrl.serving.vllm import VllmUnavailable
    from runner.agl import AglAgent
    from runner.command import named_values

    try:
        env_map = named_values(args.env_map, "--env-map", "NAME=PATH")
        if args.agl_class:
            agent = AglAgent(agent_class=args.agl_class, env_map=env_map)
        elif args.command:
            command = shlex.split(args.command)
            agent = AglAgent(command=command, env_map=env_map) if env_map else command
        else:
            if env_map:
                raise ValueError("--env-map applies to --command and --agl-class")
            agent = args.agent
        if bool(args.endpoint) != bool(args.served_model):
            raise ValueError("--endpoint and --served-model go together")
        if args.endpoint_key_env and not args.endpoint:
            raise ValueError("--endpoint-key-env goes with --endpoint")
        evaluate(
            agent,
            args.rows,
            model=(
                ServedModel(args.endpoint, args.served_model, args.endpoint_key_env)
                if args.endpoint
                else args.model
            ),
            version=args.version,
            k=args.k,
            slice_by=args.slice_by,
            success_threshold=args.success_threshold,
            sampling_by_mode={"val": {"temperature": 0.0}} if args.greedy else None,
            store=args.store,
            output_dir=args.output_dir,
            workers=args.workers,
            runner_processes=args.runner_processes,
            engine=args.engine,
        )
    except (ValueError, TypeError, FileNotFoundError, NotImplementedError, VllmUnavailable) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: every process the evaluation started is stopped", file=sys.stderr)
        return 130
    print(f"report: {args.output_dir / REPORT_FILE}", flush=True)
    return 0
