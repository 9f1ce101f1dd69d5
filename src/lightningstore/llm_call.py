"""One LLM call as span content: its name and attributes, from the request and the recorded response.

The proxy and the runner's `instrument_openai` both build their LLM spans here, so one request/response
pair gives the same attributes whichever recorded it, and `trainable` is decided once, by `is_trainable`.
Who called and how (rollout, attempt, agent, upstream, retries, latency) is the caller's to add.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lightningstore import semconv
from lightningstore.llm_record import CallRecord, Kind

TRAINABLE_SYSTEM = "openai"
"""The `gen_ai.system` of the backends we train: OpenAI-compatible servers (vLLM, our inference server).

Other providers (routed through LiteLLM: Anthropic, Bedrock, ...) serve weights we do not own: observed only.
"""


def span_name(kind: Kind) -> str:
    """The LLM span's name: `chat` or `text_completion` (the GenAI operation)."""
    return semconv.LLM_SPAN_NAME if kind == "chat" else semconv.TEXT_COMPLETION_SPAN_NAME


def is_trainable(record: CallRecord, system: str | None) -> bool:
    """The one rule for `lightningrl.llm.trainable`: the call can become training data when

    1. its backend is one we train (`system` is `TRAINABLE_SYSTEM`),
    2. it succeeded (no error recorded, however late: a stream cut short is not a sample of the policy),
    3. the prompt token ids the model saw are recorded and non-empty, and
    4. every choice has non-empty response token ids with exactly one logprob per token.
    """
    return system == TRAINABLE_SYSTEM and record.error is None and record.has_tokens()


def _json(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _number(value: Any) -> int | float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


AGENT_SAMPLING_KEYS = {"temperature": semconv.LLM_AGENT_TEMPERATURE, "top_p": semconv.LLM_AGENT_TOP_P}


def request_attributes(
    kind: Kind, request: Mapping[str, Any], system: str | None, agent: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What is known before the call: operation, backend, model, sampling, the messages or prompt.

    `request` is what was sent; `agent`, when a proxy rewrote it, what the agent asked: each of its
    sampling values that was not sent (`AGENT_SAMPLING_KEYS`) is kept under its agent-request key.
    """
    prompt = request.get("messages") if kind == "chat" else request.get("prompt")
    if kind == "chat" and prompt is not None:
        prompt = list(prompt)  # the openai client accepts any iterable of messages
    max_tokens = _number(request.get("max_completion_tokens"))
    attributes: dict[str, Any] = {
        semconv.GEN_AI_OPERATION: span_name(kind),
        semconv.GEN_AI_SYSTEM: system,
        semconv.GEN_AI_REQUEST_MODEL: None if request.get("model") is None else str(request["model"]),
        semconv.GEN_AI_TEMPERATURE: _number(request.get("temperature")),
        semconv.GEN_AI_TOP_P: _number(request.get("top_p")),
        semconv.GEN_AI_MAX_TOKENS: max_tokens
        if max_tokens is not None
        else _number(request.get("max_tokens")),
        semconv.LLM_REQUEST_MESSAGES: None if prompt is None else _json(prompt),
        semconv.LLM_REQUEST_TOOLS: _json(list(request["tools"]))
        if kind == "chat" and request.get("tools")
        else None,
        semconv.LLM_REQUEST_TOOL_CHOICE: _json(request["tool_choice"])
        if kind == "chat" and request.get("tool_choice") not in (None, "auto")
        else None,
    }
    for key, attribute in AGENT_SAMPLING_KEYS.items():
        asked = _number((agent or {}).get(key))
        if asked is not None and asked != _number(request.get(key)):
            attributes[attribute] = asked
    return {key: value for key, value in attributes.items() if value is not None}


def response_attributes(record: CallRecord, system: str | None) -> dict[str, Any]:
    """What the call answered (choice 0 in the flat keys, every choice in `LLM_CHOICES` when n > 1),
    and whether it is trainable."""
    choices = record.ordered_choices()
    first = choices[0] if choices else None
    output_tokens = record.output_tokens
    if output_tokens is None and choices and all(c.token_ids is not None for c in choices):
        output_tokens = sum(len(c.token_ids or ()) for c in choices)
    prompt_ids = record.prompt_ids()
    input_tokens = record.input_tokens
    if input_tokens is None and prompt_ids is not None:
        input_tokens = len(prompt_ids)
    reasons = [c.finish_reason for c in choices if c.finish_reason is not None]
    attributes: dict[str, Any] = {
        semconv.GEN_AI_RESPONSE_MODEL: record.response_model,
        semconv.GEN_AI_RESPONSE_ID: record.response_id,
        semconv.GEN_AI_FINISH_REASONS: reasons or None,
        semconv.GEN_AI_INPUT_TOKENS: input_tokens,
        semconv.GEN_AI_OUTPUT_TOKENS: output_tokens,
        semconv.LLM_RESPONSE_TEXT: first.text if first else None,
        semconv.LLM_PROMPT_TOKEN_IDS: prompt_ids,
        semconv.LLM_RESPONSE_TOKEN_IDS: first.token_ids if first else None,
        semconv.LLM_RESPONSE_LOGPROBS: first.logprobs if first else None,
        semconv.LLM_CHOICES: _json([c.as_json() for c in choices]) if len(choices) > 1 else None,
        semconv.LLM_TRAINABLE: is_trainable(record, system),
    }
    return {key: value for key, value in attributes.items() if value is not None}


def llm_call_attributes(
    kind: Kind,
    request: Mapping[str, Any],
    record: CallRecord,
    system: str | None,
    agent: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Every request and response attribute of one call (`agent`: see `request_attributes`)."""
    return {**request_attributes(kind, request, system, agent), **response_attributes(record, system)}
