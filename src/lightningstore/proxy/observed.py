"""Observe-only calls to non-OpenAI providers through litellm: recorded as text, never trainable."""

from __future__ import annotations

import os
from typing import Any

from lightningstore.proxy.errors import ProxyError
from lightningstore.proxy.request import JSON, CallRequest
from lightningstore.resource import LLM

_NOT_FOR_LITELLM = frozenset({"model", "stream", "stream_options", "return_token_ids"})


async def call_litellm(llm: LLM, endpoint: str, call: CallRequest) -> JSON:
    """The provider's answer as an OpenAI body (never streamed); ProxyError with its status on failure."""
    # Without this litellm fetches its model price map from the internet on import.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    kwargs: dict[str, Any] = {k: v for k, v in call.body.items() if k not in _NOT_FOR_LITELLM}
    model = f"{llm.provider}/{llm.model}"
    try:
        if call.kind == "chat":
            response = await litellm.acompletion(model=model, api_base=endpoint, **kwargs)
        else:
            response = await litellm.atext_completion(model=model, api_base=endpoint, **kwargs)
    except Exception as error:  # litellm raises its own hierarchy; each carries an HTTP status
        status = getattr(error, "status_code", None)
        status = status if isinstance(status, int) and 400 <= status < 600 else 502
        raise ProxyError(status, f"provider {llm.provider!r} call failed: {error}") from None
    return response.model_dump(mode="json")


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
