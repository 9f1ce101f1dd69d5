"""The `lightningrl` command line: each subcommand lives in lightningrl.commands.<name> (the demos' in
lightningrl.demos.commands.<name>)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import pkgutil
import sys

# Loaded by name: the library imports nothing from lightningrl.demos (tests/test_import_graph.py).
COMMAND_PACKAGES = ("lightningrl.commands", "lightningrl.demos.commands")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand; or, given the `command` a child process runs (`runner`, `store`,
    `serve-model`), only its module: each module imports what it needs, and a runner or store child
    should not wait seconds for torch that only training uses."""
    parser = argparse.ArgumentParser(prog="lightningrl", description="Train any agent with RL.")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in _command_modules(command):
        importlib.import_module(module).register(sub)
    return parser


def _command_modules(command: str | None) -> list[str]:
    """`lightningrl.commands.<command>` when there is one (`-` read as `_`), else every command module."""
    if command and command.replace("-", "_").isidentifier():
        module = f"{COMMAND_PACKAGES[0]}.{command.replace('-', '_')}"
        if importlib.util.find_spec(module) is not None:
            return [module]
    modules = []
    for package in COMMAND_PACKAGES:
        path = importlib.import_module(package).__path__
        modules += [
            f"{package}.{info.name}" for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name)
        ]
    return modules


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
