"""The `runner` command: options, and running a Runner until done or signalled (SIGINT/SIGTERM stop it)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import shlex
import signal
from collections.abc import Callable

from lightningstore import open_store
from runner.agent import LitAgent
from runner.controllers.local import LocalController
from runner.credentials import RunnerCredentials, take_credentials
from runner.loader import load_agent
from runner.runner import Runner


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", required=True, help="store server URL (http://...) or database URL / SQLite path"
    )
    agent = parser.add_mutually_exclusive_group(required=True)
    agent.add_argument(
        "--agent",
        help="the agent as module:function, module:LitAgentClass or path/to/script.py:function",
    )
    agent.add_argument(
        "--command",
        help="a command line run once per rollout (task JSON on stdin, see LocalController), "
        "e.g. --command 'python my_agent.py'",
    )
    parser.add_argument(
        "--pass-env",
        action="append",
        default=[],
        metavar="NAME",
        help="with --command: give the agent this variable of the runner's environment (repeatable); "
        "the agent otherwise gets only its attempt's variables and a safe base (PATH, HOME, locale...)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="with --command: set this variable in the agent's environment (repeatable)",
    )
    parser.add_argument(
        "--env-map",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="with --command: set NAME to the task's field at PATH (Agent Lightning v1.0's env_map: "
        "input.question, input.items.0, input for the whole task, other text as is; repeatable)",
    )
    parser.add_argument("--cwd", default=None, help="with --command: the agent process's working directory")
    parser.add_argument("--workers", type=int, default=4, help="concurrent rollouts (default 4)")
    parser.add_argument("--proxy-url", help="the LLM proxy root, e.g. http://127.0.0.1:4747/proxy")
    parser.add_argument(
        "--production",
        action="store_true",
        help="serve only approved versions: refuse a rollout whose resource set names any other",
    )
    parser.add_argument(
        "--token",
        help="bearer token for a store URL (default $LIGHTNINGRL_RUNNER_TOKEN, which, like every role "
        "token and $LIGHTNINGRL_AGENT_SECRET, is removed from the environment once read)",
    )
    parser.add_argument("--max-rollouts", type=int, help="stop after this many rollouts")
    parser.add_argument("--idle-timeout", type=float, help="stop after this many seconds without work")
    parser.add_argument("--heartbeat-interval", type=float, default=5.0)
    parser.add_argument("--poll-interval", type=float, default=0.05)
    parser.add_argument(
        "--stop-timeout", type=float, default=30.0, help="grace for in-flight rollouts on stop"
    )
    parser.add_argument("--no-progress", action="store_true", help="no live progress display")
    parser.add_argument(
        "--loop",
        choices=("auto", "asyncio", "uvloop"),
        default="auto",
        help="event loop: uvloop when installed (auto), or asyncio's own for agents that need it",
    )
    parser.add_argument("--log-level", default="warning")


def _agent_of(args: argparse.Namespace) -> LitAgent:
    """The --agent spec loaded, or a LocalController for --command."""
    if args.command is None:
        if args.pass_env or args.env or args.env_map or args.cwd:
            raise SystemExit(
                "--pass-env, --env, --env-map and --cwd apply to --command: an --agent runs in the "
                "runner's own process"
            )
        return load_agent(args.agent)
    command = shlex.split(args.command)
    if not command:
        raise SystemExit("--command must not be empty")
    store_url = args.store if args.store.startswith(("http://", "https://")) else None
    env, env_map = (
        named_values(args.env, "--env", "NAME=VALUE"),
        named_values(args.env_map, "--env-map", "NAME=PATH"),
    )
    try:
        return LocalController(
            command, store_url=store_url, env=env, pass_env=args.pass_env, env_map=env_map, cwd=args.cwd
        )
    except ValueError as error:
        raise SystemExit(f"--pass-env/--env/--env-map: {error}") from None


def named_values(items: list[str], flag: str, shape: str) -> dict[str, str]:
    """`NAME=VALUE` items as a dict; SystemExit naming the flag for one without `=`."""
    pairs: dict[str, str] = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not equals:
            raise SystemExit(f"{flag} takes {shape}, got {item!r}")
        pairs[name] = value
    return pairs


async def _run(args: argparse.Namespace, credentials: RunnerCredentials) -> int:
    agent = _agent_of(args)
    store = open_store(args.store, credentials.token, role=None)
    runner = Runner(
        store,
        agent,
        workers=args.workers,
        proxy_url=args.proxy_url,
        agent_key_secret=credentials.agent_secret,
        production=args.production,
        heartbeat_interval=args.heartbeat_interval,
        poll_interval=args.poll_interval,
        show_progress=not args.no_progress,
        stop_timeout=args.stop_timeout,
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, runner.stop)
    try:
        summary = await runner.run(max_rollouts=args.max_rollouts, idle_timeout=args.idle_timeout)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await store.close()
    print(
        f"claimed={summary.claimed} succeeded={summary.succeeded} failed={summary.failed} "
        f"timed_out={summary.timed_out} ended_elsewhere={summary.ended_elsewhere}",
        flush=True,
    )
    return 0


def run_from_args(args: argparse.Namespace) -> int:
    """Run the runner the parsed arguments describe; 0 when it stopped cleanly."""
    # First, before an agent is loaded: its module's import-time code runs in this process too.
    credentials = take_credentials(args.token)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.workers < 1:
        raise SystemExit(f"--workers must be at least 1, got {args.workers}")
    with asyncio.Runner(loop_factory=_loop_factory(args.loop)) as loop_runner:
        return loop_runner.run(_run(args, credentials))


def _loop_factory(kind: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop (less CPU per request) when asked or, for auto, when installed; else asyncio's."""
    if kind == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if kind == "uvloop":
            raise SystemExit("--loop uvloop: uvloop is not installed (pip install uvloop)") from None
        return None
    return uvloop.new_event_loop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runner", description="Run an agent on a store's rollouts."
    )
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))
