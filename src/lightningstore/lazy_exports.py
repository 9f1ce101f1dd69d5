"""A package's lazy attributes (PEP 562): a name imports its module on first use, then stays bound."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` for `package`: `modules` maps each lazy name to the module that defines it.

    Packages use it for names whose modules pull in something heavy (SQLAlchemy, httpx, FastAPI,
    verl), so that importing the package stays cheap.
    """

    def __getattr__(name: str) -> Any:
        if name not in modules:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(modules[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
