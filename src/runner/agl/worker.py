"""Run one Agent Lightning v1.0 class agent, as v1.0's local worker does: `python worker.py module:Class`.

Imports `module` (the working directory first on sys.path, as under `python -c`), instantiates `Class`
with no arguments, calls `run()` and awaits it when it returns an awaitable; exit code 0 when it
returned, 1 with the traceback when it raised. The return value is ignored (a v1.0 agent posts its
reward to $AGL_EVENT_URL itself). Executed by path, so that starting it imports nothing of ours: the
agent's process holds only what the agent imports.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import sys
import traceback


def run_class_agent(agent_class_path: str) -> int:
    try:
        if ":" in agent_class_path:
            module_name, class_name = agent_class_path.split(":", 1)
        else:
            module_name, class_name = agent_class_path.rsplit(".", 1)
        loaded = getattr(importlib.import_module(module_name), class_name)
        if not isinstance(loaded, type):
            raise TypeError(f"{agent_class_path} is not a class")
        result = loaded().run()
        if inspect.isawaitable(result):
            asyncio.run(result)  # type: ignore[arg-type]
        return 0
    except Exception:
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: worker.py module:Class", file=sys.stderr)
        sys.exit(2)
    # Run by path, sys.path[0] is this file's folder: the agent's modules resolve from the working
    # directory instead, as under v1.0's `python -c` worker.
    sys.path[0] = os.getcwd()
    sys.exit(run_class_agent(sys.argv[1]))
