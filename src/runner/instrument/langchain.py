"""LightningCallbackHandler: LangChain chain, tool and LLM steps as spans of the current attempt.

LLM steps are recorded as `step.llm.<name>` without GenAI operation attributes: the model call itself is
recorded once, by the proxy or by `instrument_openai`, so credit assignment never counts it twice.
"""

from __future__ import annotations

import threading
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult
from opentelemetry import trace as otel_trace
from opentelemetry.trace import Span

from lightningstore.semconv import STEP_SPAN_PREFIX, TOOL_SPAN_PREFIX
from runner.step_spans import ARGUMENTS, RESULT, TRACE_KIND, record_error, to_text
from runner.tracing.context import AttemptContext, current_attempt

LLM_MODEL = "lightningrl.langchain.model"
LLM_STEP_PREFIX = STEP_SPAN_PREFIX + "llm."


def _name(serialized: dict[str, Any] | None, kwargs: dict[str, Any], default: str) -> str:
    if kwargs.get("name"):
        return str(kwargs["name"])
    serialized = serialized or {}
    if serialized.get("name"):
        return str(serialized["name"])
    ident = serialized.get("id")
    return str(ident[-1]) if isinstance(ident, list) and ident else default


class LightningCallbackHandler(BaseCallbackHandler):
    """Pass in `config={"callbacks": [LightningCallbackHandler()]}`; records nothing outside a rollout."""

    run_inline = True
    raise_error = False

    def __init__(self, attempt: AttemptContext | None = None) -> None:
        self._attempt = attempt or current_attempt()
        self._spans: dict[UUID, Span] = {}
        self._lock = threading.Lock()

    def _context(self) -> AttemptContext | None:
        return current_attempt() or self._attempt

    def _start(
        self, name: str, kind: str, run_id: UUID, parent_run_id: UUID | None, attributes: dict[str, Any]
    ) -> None:
        context = self._context()
        if context is None:
            return
        with self._lock:
            parent = self._spans.get(parent_run_id) if parent_run_id is not None else None
        parent_context = otel_trace.set_span_in_context(parent) if parent is not None else None
        span = context.tracer.start_span(
            name, context=parent_context, attributes={TRACE_KIND: kind, **attributes}
        )
        with self._lock:
            self._spans[run_id] = span

    def _end(
        self, run_id: UUID, result: Any = None, error: BaseException | None = None, **extra: Any
    ) -> None:
        with self._lock:
            span = self._spans.pop(run_id, None)
        if span is None:
            return
        if error is not None:
            record_error(span, error)
        elif result is not None:
            span.set_attribute(RESULT, to_text(result))
        if extra:
            span.set_attributes(extra)
        span.end()

    def _on_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A chain, tool or model run that raised: its span ends with the error."""
        self._end(run_id, error=error)

    on_chain_error = on_tool_error = on_llm_error = _on_error

    # ---- chains -------------------------------------------------------------------------------

    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        name = STEP_SPAN_PREFIX + _name(serialized, kwargs, "chain")
        self._start(name, "step", run_id, parent_run_id, {ARGUMENTS: to_text(inputs)})

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, outputs)

    # ---- tools --------------------------------------------------------------------------------

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = TOOL_SPAN_PREFIX + _name(serialized, kwargs, "tool")
        self._start(
            name,
            "tool",
            run_id,
            parent_run_id,
            {ARGUMENTS: to_text(inputs if inputs is not None else input_str)},
        )

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, getattr(output, "content", output))

    # ---- models -------------------------------------------------------------------------------

    def _start_llm(
        self,
        serialized: dict[str, Any],
        request: Any,
        run_id: UUID,
        parent_run_id: UUID | None,
        kwargs: dict[str, Any],
    ) -> None:
        params = kwargs.get("invocation_params") or {}
        attributes: dict[str, Any] = {ARGUMENTS: to_text(request)}
        model = params.get("model") or params.get("model_name")
        if model:
            attributes[LLM_MODEL] = str(model)
        self._start(
            LLM_STEP_PREFIX + _name(serialized, kwargs, "llm"), "llm", run_id, parent_run_id, attributes
        )

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        request = [[{"role": m.type, "content": m.content} for m in batch] for batch in messages]
        self._start_llm(serialized, request, run_id, parent_run_id, kwargs)

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start_llm(serialized, prompts, run_id, parent_run_id, kwargs)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        texts = [g.text for batch in response.generations for g in batch]
        usage = (response.llm_output or {}).get("token_usage") or {}
        extra = {f"lightningrl.langchain.{k}": v for k, v in usage.items() if isinstance(v, int)}
        self._end(run_id, texts[0] if len(texts) == 1 else texts, **extra)
