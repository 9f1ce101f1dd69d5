"""The `lightningrl` command line: each subcommand lives in lightningrl.commands.<name>."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from lightningrl import commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lightningrl", description="Train any agent with RL.")
    sub = parser.add_subparsers(dest="command", required=True)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"lightningrl.commands.{info.name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
