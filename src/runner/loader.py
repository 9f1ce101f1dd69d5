"""Load an agent named `module:attribute` or `path/to/script.py:attribute`."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from runner.agent import LitAgent, as_agent

SCRIPT_MODULE_NAME = "__mp_main__"
"""The name a script is loaded under: not `__main__`, so its `if __name__ == "__main__":` block does
not run again in the runner (multiprocessing's spawn does the same)."""


def is_script_spec(module_part: str) -> bool:
    """True when the left of `X:attribute` is a file path rather than a module name."""
    return module_part.endswith(".py") or os.sep in module_part or "/" in module_part


def load_script(path: str | Path) -> ModuleType:
    """Import a .py file as `__mp_main__` (its directory on sys.path, as when the script runs)."""
    file = Path(path).resolve()
    if not file.is_file():
        raise FileNotFoundError(f"agent script {str(path)!r} does not exist")
    loaded = sys.modules.get(SCRIPT_MODULE_NAME)
    if loaded is not None and getattr(loaded, "__file__", None) == str(file):
        return loaded
    if str(file.parent) not in sys.path:
        sys.path.insert(0, str(file.parent))
    spec = importlib.util.spec_from_file_location(SCRIPT_MODULE_NAME, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load agent script {str(file)!r}")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, so dataclasses and pickling inside the script find their module.
    sys.modules[SCRIPT_MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[SCRIPT_MODULE_NAME]
        raise
    return module


def load_agent(spec: str) -> LitAgent:
    """The agent `spec` names: a LitAgent, a LitAgent subclass (instantiated) or a function.

    `spec` is `module:attribute` (imported with the working directory on sys.path) or
    `path/to/script.py:attribute` (the file loaded under the module name `__mp_main__`)."""
    module_name, _, attribute = spec.rpartition(":")
    if not module_name or not attribute:
        raise ValueError(f"--agent must look like module:function or script.py:function, got {spec!r}")
    if is_script_spec(module_name):
        module = load_script(module_name)
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        module = importlib.import_module(module_name)
    target: object = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(
                f"module {module_name!r} has no attribute {attribute!r} (from --agent {spec!r})"
            ) from None
    if isinstance(target, type) and issubclass(target, LitAgent):
        return target()
    return as_agent(target)  # type: ignore[arg-type]
