"""The `lightningrl` command line: each subcommand lives in lightningrl.commands.<name> (the demos' in
lightningrl.demos.commands.<name>)."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

# Loaded by name: the library imports nothing from lightningrl.demos (tests/test_import_graph.py).
COMMAND_PACKAGES = ("lightningrl.commands", "lightningrl.demos.commands")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lightningrl", description="Train any agent with RL.")
    sub = parser.add_subparsers(dest="command", required=True)
    for package in COMMAND_PACKAGES:
        path = importlib.import_module(package).__path__
        for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
            importlib.import_module(f"{package}.{info.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
