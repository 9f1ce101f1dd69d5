"""LLM span attributes (GenAI conventions + exact token ids) from an OpenAI-shaped request and response."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lightningstore import semconv

SAMPLING_KEYS = {
    "temperature": semconv.GEN_AI_TEMPERATURE,
    "top_p": semconv.GEN_AI_TOP_P,
    "max_tokens": semconv.GEN_AI_MAX_TOKENS,
    "max_completion_tokens": semconv.GEN_AI_MAX_TOKENS,
}


def _json(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def request_attributes(operation: str, kwargs: Mapping[str, Any], base_url: str) -> dict[str, Any]:
    """Attributes known before the call: operation, model, sampling, messages or prompt, upstream."""
    attributes: dict[str, Any] = {
        semconv.GEN_AI_OPERATION: operation,
        semconv.GEN_AI_SYSTEM: "openai",
        semconv.LLM_UPSTREAM: base_url,
    }
    if kwargs.get("model") is not None:
        attributes[semconv.GEN_AI_REQUEST_MODEL] = str(kwargs["model"])
    for key, attribute in SAMPLING_KEYS.items():
        value = kwargs.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            attributes[attribute] = value
    request = kwargs.get("messages") if operation == "chat" else kwargs.get("prompt")
    if request is not None:
        attributes[semconv.LLM_REQUEST_MESSAGES] = _json(list(request) if operation == "chat" else request)
    return attributes


def _ints(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return value
    return None


def _choice_logprobs(choice: Mapping[str, Any]) -> list[float] | None:
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, Mapping):
        return None
    if isinstance(logprobs.get("content"), list):  # chat shape
        values = [entry.get("logprob") for entry in logprobs["content"]]
    elif isinstance(logprobs.get("token_logprobs"), list):  # completions shape
        values = logprobs["token_logprobs"]
    else:
        return None
    return [float(v) for v in values] if all(isinstance(v, int | float) for v in values) else None


def _choice_text(choice: Mapping[str, Any]) -> str | None:
    message = choice.get("message")
    if isinstance(message, Mapping):
        content = message.get("content")
        return content if isinstance(content, str) else None
    text = choice.get("text")
    return text if isinstance(text, str) else None


def response_attributes(body: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes of a response body (vLLM `return_token_ids` shape when the backend sends token ids)."""
    attributes: dict[str, Any] = {}
    if body.get("model"):
        attributes[semconv.GEN_AI_RESPONSE_MODEL] = str(body["model"])
    if body.get("id"):
        attributes[semconv.GEN_AI_RESPONSE_ID] = str(body["id"])
    usage = body.get("usage")
    if isinstance(usage, Mapping):
        if isinstance(usage.get("prompt_tokens"), int):
            attributes[semconv.GEN_AI_INPUT_TOKENS] = usage["prompt_tokens"]
        if isinstance(usage.get("completion_tokens"), int):
            attributes[semconv.GEN_AI_OUTPUT_TOKENS] = usage["completion_tokens"]
    choices = [c for c in body.get("choices") or [] if isinstance(c, Mapping)]
    reasons = [str(c.get("finish_reason")) for c in choices if c.get("finish_reason") is not None]
    if reasons:
        attributes[semconv.GEN_AI_FINISH_REASONS] = reasons
    if not choices:
        return attributes
    first = choices[0]
    text = _choice_text(first)
    if text is not None:
        attributes[semconv.LLM_RESPONSE_TEXT] = text
    prompt_ids = _ints(body.get("prompt_token_ids")) or _ints(first.get("prompt_token_ids"))
    response_ids = _ints(first.get("token_ids"))
    logprobs = _choice_logprobs(first)
    if prompt_ids is not None:
        attributes[semconv.LLM_PROMPT_TOKEN_IDS] = prompt_ids
    if response_ids is not None:
        attributes[semconv.LLM_RESPONSE_TOKEN_IDS] = response_ids
    if logprobs is not None:
        attributes[semconv.LLM_RESPONSE_LOGPROBS] = logprobs
    attributes[semconv.LLM_TRAINABLE] = prompt_ids is not None and response_ids is not None
    if len(choices) > 1:
        attributes[semconv.LLM_CHOICES] = _json(
            [
                {
                    "text": _choice_text(c),
                    "token_ids": _ints(c.get("token_ids")),
                    "logprobs": _choice_logprobs(c),
                    "finish_reason": c.get("finish_reason"),
                }
                for c in choices
            ]
        )
    return attributes
