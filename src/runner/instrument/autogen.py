"""AutoGen (autogen-agentchat 0.7): a model client pointed at the attempt's LLM, and message spans of a run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autogen_agentchat.base import TaskResult
from autogen_core.models import ModelInfo
from autogen_ext.models.openai import OpenAIChatCompletionClient

from lightningstore.semconv import AGENT_NAME, STEP_SPAN_PREFIX
from runner.resources import ResolvedLLM
from runner.step_spans import RESULT, TRACE_KIND, truncate
from runner.tracing.context import current_attempt

SAMPLING_ARGS = (
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "stop",
    "frequency_penalty",
    "presence_penalty",
)
MESSAGE_SPAN = STEP_SPAN_PREFIX + "autogen.message"
MESSAGE_TYPE = "lightningrl.autogen.message_type"
PROMPT_TOKENS = "lightningrl.autogen.prompt_tokens"
COMPLETION_TOKENS = "lightningrl.autogen.completion_tokens"


def default_model_info(function_calling: bool = True) -> ModelInfo:
    """Capabilities for a model name AutoGen does not know (our tiny models, vLLM-served checkpoints)."""
    return ModelInfo(
        vision=False,
        function_calling=function_calling,
        json_output=False,
        family="unknown",
        structured_output=False,
    )


def autogen_model_client(
    llm: ResolvedLLM, *, model_info: ModelInfo | None = None, **create_args: Any
) -> OpenAIChatCompletionClient:
    """An OpenAIChatCompletionClient calling `llm` (the attempt's proxy URL and agent key) with its sampling."""
    sampling = {k: v for k, v in llm.sampling.items() if k in SAMPLING_ARGS}
    return OpenAIChatCompletionClient(
        model=llm.model,
        base_url=llm.base_url,
        api_key=llm.api_key,
        model_info=model_info or default_model_info(),
        **{**sampling, **create_args},
    )


def _text(message: Any) -> str:
    to_text = getattr(message, "to_text", None)
    if callable(to_text):
        return str(to_text())
    return str(getattr(message, "content", message))


def record_messages(messages: Sequence[Any]) -> int:
    """One `step.autogen.message` span per message, tagged with its source as the agent name; the count."""
    context = current_attempt()
    if context is None:
        return 0
    for message in messages:
        attributes: dict[str, Any] = {
            TRACE_KIND: "step",
            MESSAGE_TYPE: type(message).__name__,
            RESULT: truncate(_text(message)),
        }
        source = getattr(message, "source", None)
        if source:
            attributes[AGENT_NAME] = str(source)
        usage = getattr(message, "models_usage", None)
        if usage is not None:
            attributes[PROMPT_TOKENS] = int(usage.prompt_tokens)
            attributes[COMPLETION_TOKENS] = int(usage.completion_tokens)
        with context.tracer.start_as_current_span(MESSAGE_SPAN, attributes=attributes):
            pass
    return len(messages)


async def run_autogen(agent_or_team: Any, task: Any, **kwargs: Any) -> TaskResult:
    """`await agent_or_team.run(task=task)`, then record each message of the result as a span."""
    result: TaskResult = await agent_or_team.run(task=task, **kwargs)
    record_messages(result.messages)
    return result
