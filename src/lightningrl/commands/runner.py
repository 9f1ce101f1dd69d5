"""`lightningrl runner --store URL_OR_DB (--agent SPEC | --command CMD [--pass-env NAME]) --workers N`."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from runner.command import add_arguments

    parser = sub.add_parser("runner", help="run an agent on the store's rollouts")
    add_arguments(parser)
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from runner.command import run_from_args

    return run_from_args(args)
