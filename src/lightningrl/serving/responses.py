"""OpenAI-shaped response bodies and stream chunks, with vLLM's `token_ids`/`prompt_token_ids` fields."""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from transformers import PreTrainedTokenizerBase

from lightningrl.serving.bytelevel import token_bytes
from lightningrl.serving.sequence import Delta
from lightningrl.serving.tool_calls import parse_tool_calls as parse_calls

JSON = dict[str, Any]
_FLOOR = -9999.0  # JSON has no -inf; vLLM reports impossible tokens with this floor as well


@dataclass
class Choice:
    """One choice as accumulated from its deltas."""

    index: int
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None
    stop_reason: str | int | None = None

    def add(self, delta: Delta) -> None:
        """Append a delta's tokens and text (and its finish reason, if it has one)."""
        self.token_ids += delta.token_ids
        self.logprobs += delta.logprobs
        self.top_logprobs += delta.top_logprobs
        self.text += delta.text
        if delta.finish_reason is not None:
            self.finish_reason, self.stop_reason = delta.finish_reason, delta.stop_reason


@dataclass(frozen=True)
class ResponseHeader:
    """What every body and chunk of one response repeats."""

    id: str
    created: int
    model: str

    @classmethod
    def new(cls, prefix: str, model: str) -> ResponseHeader:
        """A fresh id (`chatcmpl-…` or `cmpl-…`) stamped now."""
        return cls(id=f"{prefix}-{uuid.uuid4().hex}", created=int(time.time()), model=model)


def _floor(logprob: float) -> float:
    """A JSON-safe logprob."""
    return logprob if math.isfinite(logprob) and logprob > _FLOOR else _FLOOR


def token_text(tokenizer: PreTrainedTokenizerBase, token_id: int) -> str:
    """How a single token reads (special tokens included)."""
    return tokenizer.decode([token_id], skip_special_tokens=False)


def _token_entry(tokenizer: PreTrainedTokenizerBase, token_id: int, logprob: float) -> JSON:
    """`{token, logprob, bytes}` as in OpenAI chat logprobs."""
    text = token_text(tokenizer, token_id)
    token = tokenizer.convert_ids_to_tokens(token_id)
    raw = token_bytes(token) if isinstance(token, str) and token_id not in tokenizer.all_special_ids else None
    return {
        "token": text,
        "logprob": _floor(logprob),
        "bytes": list(raw if raw is not None else text.encode()),
    }


def chat_logprobs(tokenizer: PreTrainedTokenizerBase, delta: Delta | Choice) -> JSON:
    """The chat `logprobs` object for the tokens of a delta or a whole choice."""
    content = []
    for token_id, logprob, top in zip(delta.token_ids, delta.logprobs, delta.top_logprobs, strict=True):
        entry = _token_entry(tokenizer, token_id, logprob)
        entry["top_logprobs"] = [_token_entry(tokenizer, alt, alt_logprob) for alt, alt_logprob in top]
        content.append(entry)
    return {"content": content, "refusal": None}


def completion_logprobs(tokenizer: PreTrainedTokenizerBase, delta: Delta | Choice, offset: int) -> JSON:
    """The legacy completions `logprobs` object; `offset` is where this text starts in the choice."""
    tokens, offsets, tops = [], [], []
    for token_id, logprob, top in zip(delta.token_ids, delta.logprobs, delta.top_logprobs, strict=True):
        text = token_text(tokenizer, token_id)
        tokens.append(text)
        offsets.append(offset)
        offset += len(tokenizer.decode([token_id], skip_special_tokens=True))
        alternatives = {token_text(tokenizer, alt): _floor(alt_logprob) for alt, alt_logprob in top}
        alternatives.setdefault(text, _floor(logprob))
        tops.append(alternatives)
    return {
        "tokens": tokens,
        "token_logprobs": [_floor(value) for value in delta.logprobs],
        "top_logprobs": tops,
        "text_offset": offsets,
    }


def usage(prompt_ids: list[list[int]], choices: list[Choice]) -> JSON:
    """Token counts: each prompt once, every choice's returned tokens."""
    prompt_tokens = sum(len(prompt) for prompt in prompt_ids)
    completion_tokens = sum(len(choice.token_ids) for choice in choices)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def chat_response(
    header: ResponseHeader,
    tokenizer: PreTrainedTokenizerBase,
    prompt_ids: list[int],
    choices: list[Choice],
    *,
    logprobs: bool,
    return_token_ids: bool,
    parse_tool_calls: bool = False,
    forced: str = "",
) -> JSON:
    """A `chat.completion` body; with `parse_tool_calls` a choice's `<tool_call>` blocks become its
    message's `tool_calls` (finish_reason "tool_calls"), its token ids unchanged. `forced`, the text
    the server wrote before the model's (the prompt's end), counts as the start of each choice's
    message: a forced call the model completed validly is a tool call, else the whole text is content."""
    body: JSON = {
        "id": header.id,
        "object": "chat.completion",
        "created": header.created,
        "model": header.model,
        "choices": [],
        "usage": usage([prompt_ids], choices),
    }
    for choice in choices:
        message: JSON = {"role": "assistant", "content": forced + choice.text}
        finish_reason = choice.finish_reason
        if parse_tool_calls:
            content, calls = parse_calls(forced + choice.text)
            if calls:
                message = {"role": "assistant", "content": content, "tool_calls": calls}
                finish_reason = "tool_calls"
        item: JSON = {
            "index": choice.index,
            "message": message,
            "logprobs": chat_logprobs(tokenizer, choice) if logprobs else None,
            "finish_reason": finish_reason,
            "stop_reason": choice.stop_reason,
        }
        if return_token_ids:
            item["token_ids"] = choice.token_ids
        body["choices"].append(item)
    if return_token_ids:
        body["prompt_token_ids"] = prompt_ids
    return body


def completion_response(
    header: ResponseHeader,
    tokenizer: PreTrainedTokenizerBase,
    prompt_ids: list[list[int]],
    n: int,
    choices: list[Choice],
    *,
    logprobs: bool,
    return_token_ids: bool,
) -> JSON:
    """A `text_completion` body (choice i*n+j answers prompt i)."""
    body: JSON = {
        "id": header.id,
        "object": "text_completion",
        "created": header.created,
        "model": header.model,
        "choices": [],
        "usage": usage(prompt_ids, choices),
    }
    for choice in choices:
        item: JSON = {
            "index": choice.index,
            "text": choice.text,
            "logprobs": completion_logprobs(tokenizer, choice, 0) if logprobs else None,
            "finish_reason": choice.finish_reason,
            "stop_reason": choice.stop_reason,
        }
        if return_token_ids:
            item["prompt_token_ids"] = prompt_ids[choice.index // n]
            item["token_ids"] = choice.token_ids
        body["choices"].append(item)
    if return_token_ids and len(prompt_ids) == 1:
        body["prompt_token_ids"] = prompt_ids[0]
    return body


def chunk(header: ResponseHeader, kind: str, choices: list[JSON], **extra: Any) -> JSON:
    """One stream chunk (`chat.completion.chunk` or `text_completion`)."""
    return {
        "id": header.id,
        "object": kind,
        "created": header.created,
        "model": header.model,
        "choices": choices,
        **extra,
    }
