"""`lightningrl`'s command line: every command listed, and the commands `fit` starts as child processes
(store server, runner, inference server) load only what they run."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fit_agents import subprocess_env

from lightningrl.cli import COMMAND_PACKAGES, build_parser


def _run(*code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *code], capture_output=True, text=True, timeout=120, env=subprocess_env()
    )


def test_help_lists_every_command() -> None:
    done = _run("-m", "lightningrl.cli", "--help")
    assert done.returncode == 0, done.stderr  # a `%` in a help text once broke it
    for command in ("dashboard", "eval", "runner", "serve-model", "store", "train", "build-tiny-model"):
        assert command in done.stdout, command
    assert COMMAND_PACKAGES[0] == "lightningrl.commands"


@pytest.mark.parametrize(
    "argv", [["store", "serve", "--db", "x.db"], ["runner", "--store", "x.db", "--command", "true"]]
)
def test_a_child_process_command_does_not_import_torch(argv: list[str]) -> None:
    """A runner or store child parses its arguments without torch (seconds of import): training needs
    it, they do not."""
    probe = (
        "import sys; from lightningrl.cli import build_parser; "
        f"args = build_parser({argv[0]!r}).parse_args({argv!r}); "
        "print(args.func.__module__, 'torch' in sys.modules)"
    )
    done = _run("-c", probe)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"lightningrl.commands.{argv[0]}", "False"], done.stdout


def test_one_command_parses_as_with_every_command() -> None:
    argv = ["serve-model", "--checkpoint", "m", "--port", "5"]
    assert (
        vars(build_parser("serve-model").parse_args(argv)).keys()
        == vars(build_parser().parse_args(argv)).keys()
    )
    # An unknown first word falls back to the whole parser, which refuses it by name.
    for word in ("no-such-command", "no.such.module", "../x"):
        with pytest.raises(SystemExit):
            build_parser(word).parse_args([word])
