"""Instrument the `openai` client (sync and async chat.completions / completions) with LLM spans.

For agents that call a model directly: calls made inside a rollout record one LLM span with GenAI
attributes and, when the backend returns them (vLLM `return_token_ids`), exact token ids and logprobs.
Calls through the LightningRL proxy are not recorded (the proxy records them); they get the
current span as W3C `traceparent` and the agent name as a header, so the proxy's span joins the trace.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from lightningstore import semconv
from lightningstore.llm_call import request_attributes, response_attributes, span_name
from lightningstore.llm_record import CallRecord, Kind
from lightningstore.semconv import is_proxy_url
from runner.step_spans import record_error
from runner.tracing.context import AttemptContext, current_agent_name, current_attempt

SYSTEM = "openai"  # the gen_ai.system of calls made with the openai client


@dataclass
class _State:
    originals: dict[tuple[type, str], Callable[..., Any]]
    request_token_ids: bool = False


_state = _State(originals={})


def _targets() -> list[tuple[type, Kind, bool]]:
    from openai.resources.chat.completions import AsyncCompletions as AsyncChat
    from openai.resources.chat.completions import Completions as Chat
    from openai.resources.completions import AsyncCompletions, Completions

    return [
        (Chat, "chat", False),
        (AsyncChat, "chat", True),
        (Completions, "completion", False),
        (AsyncCompletions, "completion", True),
    ]


def instrument_openai(request_token_ids: bool = False) -> None:
    """Patch the openai client classes (idempotent).

    `request_token_ids` adds `return_token_ids` (and logprobs) to each instrumented request: only for
    backends that accept it (vLLM, the LightningRL inference server).
    """
    _state.request_token_ids = request_token_ids
    for cls, kind, is_async in _targets():
        if (cls, "create") in _state.originals:
            continue
        original = cls.create
        _state.originals[(cls, "create")] = original
        wrapper = _async_wrapper(original, kind) if is_async else _sync_wrapper(original, kind)
        cls.create = wrapper  # type: ignore[method-assign]


def uninstrument_openai() -> None:
    """Restore the original openai methods."""
    for (cls, name), original in list(_state.originals.items()):
        setattr(cls, name, original)
    _state.originals.clear()


def _base_url(resource: Any) -> str:
    client = getattr(resource, "_client", None)
    return str(getattr(client, "base_url", ""))


def _should_record(resource: Any, kwargs: dict[str, Any]) -> AttemptContext | None:
    context = current_attempt()
    if context is None or kwargs.get("stream") or is_proxy_url(_base_url(resource)):
        return None
    return context


def _with_proxy_headers(resource: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """For a proxied call inside a rollout: add `traceparent` and the agent name header."""
    context = current_attempt()
    if context is None or not is_proxy_url(_base_url(resource)):
        return kwargs
    headers: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(headers)
    name = current_agent_name() or context.attempt_tracer.agent_name
    if name:
        headers[semconv.AGENT_NAME_HEADER] = name
    return {**kwargs, "extra_headers": {**headers, **(kwargs.get("extra_headers") or {})}}


def _with_token_request(kind: Kind, kwargs: dict[str, Any]) -> dict[str, Any]:
    if not _state.request_token_ids:
        return kwargs
    extra_body = dict(kwargs.get("extra_body") or {})
    extra_body.setdefault("return_token_ids", True)
    updated = {**kwargs, "extra_body": extra_body}
    if kwargs.get("logprobs") in (None, False):
        updated["logprobs"] = True if kind == "chat" else 0
    return updated


def _body(response: Any) -> dict[str, Any] | None:
    """The response as a dict; `with_raw_response` calls (LangChain's) are parsed (the parse is cached)."""
    if not callable(getattr(response, "model_dump", None)) and callable(getattr(response, "parse", None)):
        response = response.parse()
    dump = getattr(response, "model_dump", None)
    return dump() if callable(dump) else None


def _finish(span: Any, kind: Kind, response: Any, started: float) -> None:
    record = CallRecord(kind)
    body = _body(response)
    if body is not None:
        record.absorb(body)
    span.set_attributes(response_attributes(record, SYSTEM))
    span.set_attribute(semconv.LLM_LATENCY_MS, (time.perf_counter() - started) * 1000.0)


def _fail(span: Any, kind: Kind, error: BaseException) -> None:
    """The error on the span, and the attributes of a call that answered nothing (`trainable` False)."""
    record_error(span, error)
    record = CallRecord(kind, error=f"{type(error).__name__}: {error}")
    span.set_attributes(response_attributes(record, SYSTEM))


def _start_attributes(kind: Kind, kwargs: dict[str, Any], base_url: str) -> dict[str, Any]:
    return {**request_attributes(kind, kwargs, SYSTEM), semconv.LLM_UPSTREAM: base_url}


@dataclass
class _Call:
    """What the wrapped call answered, for the span to record when it closes."""

    response: Any = None


@contextlib.contextmanager
def _call_span(context: AttemptContext, client: Any, kind: Kind, kwargs: dict[str, Any]) -> Iterator[_Call]:
    """One LLM span around a call: the error if it raises, else the response the caller set on `_Call`."""
    attributes = _start_attributes(kind, kwargs, _base_url(client))
    with context.tracer.start_as_current_span(
        span_name(kind),
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        started = time.perf_counter()
        call = _Call()
        try:
            yield call
        except BaseException as error:
            _fail(span, kind, error)
            raise
        _finish(span, kind, call.response, started)


def _sync_wrapper(original: Callable[..., Any], kind: Kind) -> Callable[..., Any]:
    @functools.wraps(original)
    def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        context = _should_record(self, kwargs)
        if context is None:
            return original(self, *args, **_with_proxy_headers(self, kwargs))
        kwargs = _with_token_request(kind, kwargs)
        with _call_span(context, self, kind, kwargs) as call:
            call.response = original(self, *args, **kwargs)
        return call.response

    return create


def _async_wrapper(original: Callable[..., Any], kind: Kind) -> Callable[..., Any]:
    @functools.wraps(original)
    async def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        context = _should_record(self, kwargs)
        if context is None:
            return await original(self, *args, **_with_proxy_headers(self, kwargs))
        kwargs = _with_token_request(kind, kwargs)
        with _call_span(context, self, kind, kwargs) as call:
            call.response = await original(self, *args, **kwargs)
        return call.response

    return create
