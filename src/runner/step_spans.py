"""@trace: record a tool call or agent step (arguments, result, exception) as a span of the current attempt."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from typing import Any, Literal, ParamSpec, TypeVar, overload

from opentelemetry.trace import Span, Status, StatusCode

from lightningstore.semconv import STEP_SPAN_PREFIX, TOOL_SPAN_PREFIX
from runner.tracing.context import current_attempt

P = ParamSpec("P")
R = TypeVar("R")
SpanKindName = Literal["tool", "step"]
MAX_VALUE_CHARS = 4000
ARGUMENTS = "lightningrl.trace.arguments"
RESULT = "lightningrl.trace.result"
TRACE_KIND = "lightningrl.trace.kind"


def truncate(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    """`text` cut to `limit` characters, marked when cut."""
    return text if len(text) <= limit else text[:limit] + f"...[{len(text) - limit} more chars]"


def to_text(value: Any) -> str:
    """A JSON (or repr) rendering of `value`, truncated."""
    try:
        text = json.dumps(value, default=repr, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return truncate(text)


def _arguments(signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    if signature is not None:
        try:
            bound = signature.bind(*args, **kwargs)
            return to_text({k: v for k, v in bound.arguments.items() if k not in ("self", "cls")})
        except TypeError:
            pass
    return to_text({"args": list(args), "kwargs": kwargs})


def record_error(span: Span, error: BaseException) -> None:
    """Mark `span` failed with the exception (type, message, stack trace)."""
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:500]))


@overload
def trace(func: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def trace(
    *, name: str | None = None, kind: SpanKindName = "step"
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def trace(
    func: Callable[P, R] | None = None, /, *, name: str | None = None, kind: SpanKindName = "step"
) -> Any:
    """Trace a sync or async function as a `tool.<name>` or `step.<name>` span (a no-op outside a rollout)."""
    if kind not in ("tool", "step"):
        raise ValueError(f"trace kind must be 'tool' or 'step', got {kind!r}")

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        prefix = TOOL_SPAN_PREFIX if kind == "tool" else STEP_SPAN_PREFIX
        span_name = prefix + (name or fn.__name__)
        try:
            signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            signature = None

        def start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            context = current_attempt()
            if context is None:
                return None
            attributes = {TRACE_KIND: kind, ARGUMENTS: _arguments(signature, args, kwargs)}
            return context.tracer.start_as_current_span(
                span_name, attributes=attributes, record_exception=False, set_status_on_exception=False
            )

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
                manager = start(args, kwargs)
                if manager is None:
                    return await fn(*args, **kwargs)  # type: ignore[misc]
                with manager as span:
                    try:
                        result = await fn(*args, **kwargs)  # type: ignore[misc]
                    except BaseException as error:
                        record_error(span, error)
                        raise
                    span.set_attribute(RESULT, to_text(result))
                    return result

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            manager = start(args, kwargs)
            if manager is None:
                return fn(*args, **kwargs)
            with manager as span:
                try:
                    result = fn(*args, **kwargs)
                except BaseException as error:
                    record_error(span, error)
                    raise
                span.set_attribute(RESULT, to_text(result))
                return result

        return wrapper

    return decorate(func) if func is not None else decorate
