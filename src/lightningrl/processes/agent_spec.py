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

_NAME_SPEC = re.compile(r"^[^\s:]+:[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class AgentSpec:
    """Exactly one of `name` (`module:attr` or `script.py:attr`) and `command` (argv)."""

    name: str | None = None
    command: tuple[str, ...] | None = None

    def runner_args(self) -> list[str]:
        """The `lightningrl runner` arguments naming this agent."""
        if self.name is not None:
            return ["--agent", self.name]
        return ["--command", shlex.join(self.command or ())]


def agent_spec(agent: Any) -> AgentSpec:
    """How a runner process can load `agent`.

    A str that looks like `module:attr` / `path.py:attr` is that name; any other str is a command
    line (split like a shell); a list is a command line. A `@rollout` function, a plain function, a
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
