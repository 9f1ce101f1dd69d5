"""The attempt a piece of code runs in, carried by a contextvar so concurrent rollouts never mix."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runner.tracing.agent_label import agent_name, current_agent_name

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from lightningstore import LightningStore
    from runner.tracing.tracer import AttemptTracer

__all__ = [
    "AttemptContext",
    "agent_name",
    "attempt_scope",
    "current_agent_name",
    "current_attempt",
    "require_attempt",
]


@dataclass(frozen=True)
class AttemptContext:
    """What instrumentation needs to record into one attempt."""

    store: LightningStore
    rollout_id: str
    attempt_id: str
    mode: str
    attempt_tracer: AttemptTracer

    @property
    def tracer(self) -> Tracer:
        return self.attempt_tracer.tracer


_current: contextvars.ContextVar[AttemptContext | None] = contextvars.ContextVar(
    "lightningrl_attempt", default=None
)


def current_attempt() -> AttemptContext | None:
    """The attempt the calling code runs in, or None outside a rollout."""
    return _current.get()


def require_attempt(what: str) -> AttemptContext:
    """The current attempt; RuntimeError naming `what` when called outside a rollout."""
    context = _current.get()
    if context is None:
        raise RuntimeError(f"{what} must be called inside a rollout run by a Runner (no attempt is active)")
    return context


@contextmanager
def attempt_scope(context: AttemptContext) -> Iterator[AttemptContext]:
    """Make `context` the current attempt inside the block."""
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)
