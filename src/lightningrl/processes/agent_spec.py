"""AgentSpec: what runner processes are told to run (an importable name or a command line)."""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner import FunctionAgent, LitAgent
from runner.agl import AglAgent

_NAME_SPEC = re.compile(r"^[^\s:]+:[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class AgentSpec:
    """Exactly one of `name` (`module:attr` or `script.py:attr`) and `command` (argv); a command may take
    its task fields through `env_map` (Agent Lightning v1.0's) and run in `cwd`."""

    name: str | None = None
    command: tuple[str, ...] | None = None
    env_map: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None

    def runner_args(self) -> list[str]:
        """The `lightningrl runner` arguments naming this agent."""
        if self.name is not None:
            return ["--agent", self.name]
        args = ["--command", shlex.join(self.command or ())]
        for name, path in self.env_map:
            args += ["--env-map", f"{name}={path}"]
        if self.cwd is not None:
            args += ["--cwd", self.cwd]
        return args


def agent_spec(agent: Any) -> AgentSpec:
    """How a runner process can load `agent`.

    A str that looks like `module:attr` / `path.py:attr` is that name; any other str is a command
    line (split like a shell); a list is a command line; an `AglAgent` is Agent Lightning v1.0's class or
    command with its env_map, run from its cwd (default: this process's). A `@rollout` function, a plain function, a
    LitAgent class or a module-level LitAgent instance resolve to where they are defined (a script
    run as `__main__` by its file path). Anything else (a lambda, a closure) is an error saying so.
    """
    if isinstance(agent, str):
        if _NAME_SPEC.match(agent):
            return AgentSpec(name=agent)
        command = shlex.split(agent)
        if not command:
            raise ValueError("agent: an empty command line")
        return AgentSpec(command=tuple(command))
    if isinstance(agent, Sequence) and not isinstance(agent, bytes):
        if not agent or not all(isinstance(part, str) for part in agent):
            raise ValueError(f"agent: a command line must be a non-empty list of strings, got {agent!r}")
        return AgentSpec(command=tuple(agent))
    if isinstance(agent, AglAgent):
        return AgentSpec(
            command=tuple(agent.argv()),
            env_map=tuple(agent.env_map.items()),
            cwd=str(Path(agent.cwd).resolve()) if agent.cwd else str(Path.cwd()),
        )
    if isinstance(agent, FunctionAgent):
        return AgentSpec(name=_importable(agent.func, (agent, agent.func), what="@rollout function"))
    if isinstance(agent, type) and issubclass(agent, LitAgent):
        return AgentSpec(name=_importable(agent, (agent,), what="LitAgent class"))
    if isinstance(agent, LitAgent):
        return AgentSpec(name=_instance_name(agent))
    if callable(agent):
        return AgentSpec(name=_importable(agent, (agent,), what="agent function"))
    raise TypeError(
        f"agent must be a @rollout function, a LitAgent (class or instance), 'module:function' or a "
        f"command line, got {type(agent).__name__}"
    )


def _module_ref(module_name: str, what: str, label: str) -> str:
    """`module_name`, or the file path of the script running as `__main__`."""
    if module_name != "__main__":
        return module_name
    file = getattr(sys.modules["__main__"], "__file__", None)
    if not file:
        raise ValueError(
            f"{what} {label} is defined interactively (no file): runner processes load agents by name, "
            "so define it in a .py file (or a module) and pass that"
        )
    return str(Path(file).resolve())


def _importable(obj: Any, accepted: tuple[Any, ...], *, what: str) -> str:
    """`module:qualname` of `obj`, checked to name one of `accepted` at module level."""
    qualname = getattr(obj, "__qualname__", repr(obj))
    label = f"{getattr(obj, '__module__', '?')}.{qualname}"
    if "<" in qualname:  # <lambda>, <locals>
        raise ValueError(
            f"{what} {label} cannot be loaded by name in a runner process (a lambda or a function "
            "defined inside another): define it at the top level of a module or script and pass that"
        )
    module_name = obj.__module__
    module = sys.modules.get(module_name)
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
    if not any(target is a for a in accepted):
        raise ValueError(
            f"{what} {label} is not reachable as {module_name}:{qualname} (shadowed or renamed?): "
            "bind it to a top-level name of its module and pass that"
        )
    return f"{_module_ref(module_name, what, label)}:{qualname}"


def _instance_name(agent: LitAgent) -> str:
    """`module:name` of the top-level variable holding this LitAgent instance."""
    cls = type(agent)
    module = sys.modules.get(cls.__module__)
    for name, value in vars(module or object()).items():
        if value is agent:
            return f"{_module_ref(cls.__module__, 'LitAgent', repr(agent))}:{name}"
    raise ValueError(
        f"LitAgent instance {agent!r} is not a top-level variable of {cls.__module__}: runner processes "
        f"load agents by name, so assign it at the top level of its module, or pass the class {cls.__name__}"
    )
