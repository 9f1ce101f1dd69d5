"""Agent Lightning v1.0's agents, started as v1.0 starts them: `env_map` and class-style agents.

v1.0 runs each rollout as a process that reads its task from environment variables an `env_map` names
(`{"QUESTION": "input.question"}`), calls the model at $AGL_OPENAI_BASE_URL and posts its reward to
$AGL_EVENT_URL with $AGL_KEY. Its agent is a command, or a class (`module:Class`: built with no
arguments, `run()` awaited, the exit status the outcome). `AglAgent` is that setting for `fit` and the
runner; the runner gives the process its attempt's `AGL_*` variables (`controllers.environment`).

    fit(AglAgent("gsm8k_agent:ChatAgent", env_map={"QUESTION": "input.question", "ANSWER": "input.answer"}),
        rows, model=...)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WORKER = Path(__file__).with_name("worker.py")


def resolve_input_path(task_input: Any, path: str) -> Any:
    """v1.0's `_resolve_input_path`: "input" is the whole task input, "input.a.0.b" walks dict keys and
    list indexes, and any other text is a literal value."""
    if path == "input":
        return task_input
    if not path.startswith("input."):
        return path
    value = task_input
    for part in path.split(".")[1:]:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise ValueError(f"env_map path {path!r} is not in the task's input (no {part!r} there)")
    return value


def env_from_map(task_input: Any, env_map: Mapping[str, str]) -> dict[str, str]:
    """v1.0's `_build_env_from_map`: each name gets its path's value, a string as is, anything else as
    JSON (`3` -> "3", a list -> '["a", "b"]', None -> "null")."""
    env: dict[str, str] = {}
    for name, path in env_map.items():
        value = resolve_input_path(task_input, path)
        if isinstance(value, str):
            env[name] = value
            continue
        try:
            env[name] = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError) as error:
            raise ValueError(f"env_map {name}: the value at {path!r} is not JSON serializable") from error
    return env


def class_agent_command(agent_class: str) -> list[str]:
    """The command that runs a v1.0 class agent (`module:Class` or `module.Class`) in its own process."""
    if ":" not in agent_class and "." not in agent_class:
        raise ValueError(f"agent_class must look like module:Class, got {agent_class!r}")
    return [sys.executable, str(WORKER), agent_class]


@dataclass(frozen=True)
class AglAgent:
    """An agent written for Agent Lightning v1.0, unchanged: a class (`agent_class`, v1.0's
    `agentlightning.local.agent_class`) or a `command`, fed its task through `env_map` (v1.0's
    `agentlightning.local.env_map`), run from `cwd` (default: the runner's working directory)."""

    agent_class: str | None = None
    command: Sequence[str] | None = None
    env_map: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None

    def __post_init__(self) -> None:
        if (self.agent_class is None) == (self.command is None):
            raise ValueError("AglAgent takes exactly one of agent_class (module:Class) and command")
        if self.command is not None and (
            isinstance(self.command, str)
            or not self.command
            or not all(isinstance(p, str) for p in self.command)
        ):
            raise ValueError(f"AglAgent command must be a non-empty list of strings, got {self.command!r}")
        for name, path in self.env_map.items():
            if not isinstance(name, str) or not name or "=" in name or not isinstance(path, str):
                raise ValueError(f"env_map takes NAME -> 'input.path' strings, got {name!r}: {path!r}")
        if self.agent_class is not None:
            class_agent_command(self.agent_class)

    def argv(self) -> list[str]:
        """The process each rollout runs."""
        return class_agent_command(self.agent_class) if self.agent_class else list(self.command or ())
