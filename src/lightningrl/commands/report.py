"""`lightningrl report tokens --store URL`: the token accounting of any stored run, per version."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("report", help="reports on a stored run")
    kinds = parser.add_subparsers(dest="report_command", required=True)
    tokens = kinds.add_parser(
        "tokens",
        help="per sampling version: retokenization drift, prefix continuity and train-inference mismatch",
    )
    tokens.add_argument("--store", required=True, help="a SQLite path, database URL or store server URL")
    tokens.add_argument(
        "--token", default=os.environ.get("LIGHTNINGRL_TOKEN"), help="bearer token for a server"
    )
    tokens.add_argument(
        "--resource", default="llm", help="the LLM resource trained (default: llm, as fit names it)"
    )
    tokens.add_argument("--limit", type=int, default=None, help="read at most this many rollouts")
    tokens.set_defaults(func=_tokens)


def _tokens(args: argparse.Namespace) -> int:
    from lightningrl.accounting.stored_run import format_table, stored_run_tokens
    from lightningstore import open_store

    async def report() -> str:
        store = open_store(args.store, args.token, role=None, max_retries=3)
        try:
            return format_table(await stored_run_tokens(store, args.resource, limit=args.limit))
        finally:
            await store.close()

    try:
        print(asyncio.run(report()))
    except ValueError as error:
        print(f"lightningrl report tokens: {error}", file=sys.stderr)
        return 2
    return 0
