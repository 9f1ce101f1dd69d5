"""The store's HTTP server: one FastAPI app with the store API, OTLP ingest, proxy and gate.

FastAPI is imported only on demand. Tokens and agent keys live in `lightningstore.auth`.
"""

from __future__ import annotations

from lightningstore.lazy_exports import lazy_exports

_LAZY = {
    "build_app": "lightningstore.server.app",
    "serve": "lightningstore.server.run",
    "add_serve_arguments": "lightningstore.server.run",
    "serve_from_args": "lightningstore.server.run",
    "load_tokens": "lightningstore.server.run",
}

__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "add_serve_arguments",
    "build_app",
    "load_tokens",
    "serve",
    "serve_from_args",
]
