"""Demonstrations for a supervised warm-up, and their token ids as the inference server renders them."""

from __future__ import annotations

from typing import Any

from lightningrl.serving.tool_calls import template_messages
from lightningrl.serving.tool_prompt import render_chat

Demonstration = tuple[list[dict[str, Any]], str] | tuple[list[dict[str, Any]], str, list[dict[str, Any]]]
"""(chat messages up to the model's turn, the completion the model should write[, the tools offered]).

With tools (OpenAI `tools=`), the prompt renders as the inference server renders a request that
offers them; assistant messages may carry OpenAI `tool_calls` (arguments as JSON strings)."""


def encode_demonstration(
    tokenizer,
    messages: list[dict[str, Any]],
    completion: str,
    tools: list[dict[str, Any]] | None = None,
) -> tuple[list[int], list[int]]:
    """(prompt ids as the chat template renders them for generation, completion ids + eos).

    `tools` and assistant `tool_calls` render as the inference server renders them (arguments as objects;
    a template without a tool section as `tool_prompt.render_chat` rewrites it)."""
    conversation = template_messages(messages)
    text = render_chat(tokenizer, conversation, tools, add_generation_prompt=True)
    prompt = tokenizer.encode(text, add_special_tokens=False)
    completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return list(prompt), completion_ids
