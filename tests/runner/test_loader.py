"""load_agent: modules by name, and scripts by path without re-running their main block."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from runner import FunctionAgent, LitAgent
from runner.loader import SCRIPT_MODULE_NAME, load_agent


def test_a_script_loads_under_another_name_than_main(tmp_path: Path) -> None:
    script = tmp_path / "my_agent.py"
    marker = tmp_path / "main-ran"
    script.write_text(
        textwrap.dedent(
            f"""
            from runner import LitAgent, rollout

            @rollout
            def solve(task):
                return 1.0

            class Solver(LitAgent):
                def rollout(self, task, resources):
                    return 0.5

            if __name__ == "__main__":
                open({str(marker)!r}, "w").write("ran")
            """
        )
    )
    try:
        agent = load_agent(f"{script}:solve")
        assert isinstance(agent, FunctionAgent) and agent({"x": 1}) == 1.0
        assert agent.func.__module__ == SCRIPT_MODULE_NAME
        solver = load_agent(f"{script}:Solver")
        assert isinstance(solver, LitAgent) and solver.rollout({}, None) == 0.5
        assert not marker.exists()  # the script's main block did not run
    finally:
        sys.modules.pop(SCRIPT_MODULE_NAME, None)


def test_bad_specs_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="module:function"):
        load_agent("no_colon")
    with pytest.raises(FileNotFoundError, match="missing.py"):
        load_agent(f"{tmp_path}/missing.py:solve")
    script = tmp_path / "empty_agent.py"
    script.write_text("x = 1\n")
    try:
        with pytest.raises(ValueError, match="has no attribute 'solve'"):
            load_agent(f"{script}:solve")
    finally:
        sys.modules.pop(SCRIPT_MODULE_NAME, None)
