"""Load an agent named `module:attribute` and open a store named by URL or database path."""

from __future__ import annotations

import importlib
import os
import sys

from lightningstore import LightningStore
from runner.agent import LitAgent, as_agent

RUNNER_TOKEN_ENV = "LIGHTNINGRL_RUNNER_TOKEN"


def load_agent(spec: str) -> LitAgent:
    """The agent `module:attribute` names: a LitAgent, a LitAgent subclass (instantiated) or a function."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"--agent must look like module:function, got {spec!r}")
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


def open_store(target: str, token: str | None = None) -> LightningStore:
    """A StoreClient for an http(s) URL (token from `token` or $LIGHTNINGRL_RUNNER_TOKEN), else a SqlStore."""
    if target.startswith(("http://", "https://")):
        from lightningstore.client import StoreClient

        return StoreClient(target, token=token or os.environ.get(RUNNER_TOKEN_ENV) or None)
    from lightningstore.sql import SqlStore

    return SqlStore(target)
