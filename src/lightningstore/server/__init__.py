"""The store's HTTP server: FastAPI app, scoped tokens, OTLP ingest. FastAPI is imported only on demand."""

from __future__ import annotations

from typing import Any

from lightningstore.server.agent_key import agent_key, verify_agent_key
from lightningstore.server.tokens import Caller, Permission, Role, TokenConfig

_LAZY = {
    "create_app": "lightningstore.server.app",
    "serve": "lightningstore.server.run",
    "add_serve_arguments": "lightningstore.server.run",
    "serve_from_args": "lightningstore.server.run",
    "load_tokens": "lightningstore.server.run",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)


__all__ = [
    "Caller",
    "Permission",
    "Role",
    "TokenConfig",
    "add_serve_arguments",
    "agent_key",
    "create_app",
    "load_tokens",
    "serve",
    "serve_from_args",
    "verify_agent_key",
]
