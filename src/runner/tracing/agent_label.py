"""The agent name spans started now are tagged with, carried by a contextvar (multi-agent selection)."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

_agent_name: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "lightningrl_agent_name", default=None
)


def current_agent_name() -> str | None:
    """The agent name spans started now are tagged with (`lightningrl.agent_name`)."""
    return _agent_name.get()


@contextmanager
def agent_name(name: str | None) -> Iterator[None]:
    """Tag spans started inside the block with `lightningrl.agent_name` (for multi-agent selection)."""
    token = _agent_name.set(name)
    try:
        yield
    finally:
        _agent_name.reset(token)
