"""Shape an upstream body or chunk for the agent: drop the token ids and logprobs it did not ask for."""

from __future__ import annotations

from lightningstore.proxy.request import JSON, CallRequest


def shape_for_agent(data: JSON, call: CallRequest) -> JSON:
    """`data` (changed in place) as a plain OpenAI response to exactly what the agent asked."""
    if not call.wants_token_ids:
        data.pop("prompt_token_ids", None)
    for item in data.get("choices") or ():
        if not isinstance(item, dict):
            continue
        if not call.wants_token_ids:
            item.pop("token_ids", None)
            item.pop("prompt_token_ids", None)
        if not call.wants_logprobs and "logprobs" in item:
            item["logprobs"] = None
    return data
