"""`lightningrl db upgrade|downgrade|current --url URL`."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("db", help="database schema migrations")
    actions = parser.add_subparsers(dest="db_command", required=True)
    for name, help_text, default in (
        ("upgrade", "upgrade the schema (default: to head)", "head"),
        ("downgrade", "downgrade the schema (default: to base)", "base"),
    ):
        p = actions.add_parser(name, help=help_text)
        p.add_argument("--url", required=True, help="database URL or SQLite file path")
        p.add_argument("--revision", default=default)
        p.set_defaults(func=_run)
    p = actions.add_parser("current", help="print the schema revision")
    p.add_argument("--url", required=True)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from lightningstore.sql import migrate
    from lightningstore.sql.engine import normalize_url

    if args.db_command == "upgrade":
        migrate.upgrade(args.url, args.revision)
    elif args.db_command == "downgrade":
        migrate.downgrade(args.url, args.revision)
    print(f"{normalize_url(args.url).split('@')[-1]}: {migrate.current_revision(args.url) or 'base (empty)'}")
    return 0
