"""Agents the Runner can run: a `LitAgent` subclass or any function decorated with `@rollout`."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from runner.resources import AgentResources

RolloutResult = None | float | dict[str, float]


class LitAgent:
    """Subclass and implement `rollout(task, resources)` (sync or async); `name` tags its spans."""

    name: str | None = None

    def rollout(self, task: Any, resources: AgentResources) -> Any:
        """Run one task; return None, a reward, or named rewards."""
        raise NotImplementedError(f"{type(self).__name__} must implement rollout(task, resources)")

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.rollout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class FunctionAgent(LitAgent):
    """A LitAgent wrapping one function `(task, resources) -> result` (what `@rollout` builds).

    A second parameter named `llm` gets the rollout's one LLM (`resources.llm`: base_url, api_key,
    model) instead of the whole AgentResources, as Agent Lightning's `(task, llm)` agents expect."""

    def __init__(self, func: Callable[..., Any], name: str | None = None) -> None:
        parameters = list(inspect.signature(func).parameters)
        if len(parameters) < 1:
            raise TypeError(f"a rollout function takes (task, resources), {func.__qualname__} takes none")
        self.func = func
        self.name = name
        self._wants_resources = len(parameters) >= 2
        self._wants_llm = len(parameters) >= 2 and parameters[1] == "llm"
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.func)

    def rollout(self, task: Any, resources: AgentResources) -> Any:
        if self._wants_llm:
            return self.func(task, resources.llm)
        return self.func(task, resources) if self._wants_resources else self.func(task)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"rollout({self.func.__module__}.{self.func.__qualname__}, name={self.name!r})"


@overload
def rollout(func: Callable[..., Any], /) -> FunctionAgent: ...
@overload
def rollout(*, name: str | None = None) -> Callable[[Callable[..., Any]], FunctionAgent]: ...
def rollout(func: Callable[..., Any] | None = None, /, *, name: str | None = None) -> Any:
    """Make a function `(task, resources)` (sync or async) a runnable agent; still callable directly."""
    if func is not None:
        return FunctionAgent(func, name=name)
    return lambda f: FunctionAgent(f, name=name)


def as_agent(agent: LitAgent | Callable[..., Any]) -> LitAgent:
    """`agent` itself, or a plain function wrapped as `@rollout` would."""
    if isinstance(agent, LitAgent):
        return agent
    if callable(agent):
        return FunctionAgent(agent)
    raise TypeError(f"an agent must be a LitAgent or a function (task, resources), got {agent!r}")
