"""Observe-only calls to non-OpenAI providers through litellm: recorded as text, never trainable."""

from __future__ import annotations

import os
from typing import Any

from lightningstore.data.resource import LLM
from lightningstore.proxy.errors import ProxyError
from lightningstore.proxy.request import JSON, CallRequest
from lightningstore.proxy.upstream import upstream_key

REASON_CHARS = 300
# The model is passed on its own and streaming is answered by the gateway (`as_chunk`); the agent's
# body never carries these here (`params.forwarded`), but the resource's sampling might.
_NOT_FOR_LITELLM = frozenset({"model", "stream", "stream_options", "return_token_ids"})


async def call_litellm(llm: LLM, endpoint: str, call: CallRequest) -> JSON:
    """The provider's answer as an OpenAI body (never streamed); ProxyError(502) with a short reason."""
    # Without this litellm fetches its model price map from the internet on import.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    kwargs: dict[str, Any] = {k: v for k, v in call.body.items() if k not in _NOT_FOR_LITELLM}
    model = f"{llm.provider}/{llm.model}"
    if llm.api_key_env is not None:
        kwargs["api_key"] = upstream_key(llm)
    try:
        if call.kind == "chat":
            response = await litellm.acompletion(model=model, api_base=endpoint, **kwargs)
        else:
            response = await litellm.atext_completion(model=model, api_base=endpoint, **kwargs)
    except Exception as error:  # litellm raises its own hierarchy, most carrying the provider's status
        raise ProxyError(502, failure_reason(llm.provider, error)) from None
    return response.model_dump(mode="json")


def failure_reason(provider: str, error: Exception) -> str:
    """A short reason for a failed provider call: its status, the error's kind and first line.

    litellm's messages can run on with a traceback and the provider's request; the agent gets one line.
    """
    status = getattr(error, "status_code", None)
    answered = f"answered {status}" if isinstance(status, int) else "failed"
    lines = str(error).strip().splitlines()
    first = lines[0] if lines else ""
    return f"provider {provider!r} {answered} ({type(error).__name__}): {first[:REASON_CHARS]}"


def as_chunk(data: JSON, call: CallRequest) -> JSON:
    """A whole response as one stream chunk (what a streaming agent gets from an observe-only provider)."""
    choices = []
    for item in data.get("choices") or ():
        if call.kind == "chat":
            message = item.get("message") or {}
            delta = {"role": "assistant", "content": message.get("content") or ""}
            choices.append(
                {"index": item.get("index", 0), "delta": delta, "finish_reason": item.get("finish_reason")}
            )
        else:
            choices.append(
                {
                    "index": item.get("index", 0),
                    "text": item.get("text") or "",
                    "finish_reason": item.get("finish_reason"),
                }
            )
    kind = "chat.completion.chunk" if call.kind == "chat" else "text_completion"
    return {
        "id": data.get("id"),
        "object": kind,
        "created": data.get("created"),
        "model": data.get("model"),
        "choices": choices,
    }
