"""Tool calls in hermes style: `<tool_call>{"name": …, "arguments": {…}}</tool_call>` blocks in the text.

The same convention as vLLM's `--tool-call-parser hermes` and the tinylm chat template: the model's
text is parsed after generation (its token ids are never changed), the blocks become OpenAI
`tool_calls`, and the text before the first block (less the one newline that separates them) stays
the message's content, so rendering the message again gives back the text the model wrote.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)
START = "<tool_call>"


def parse_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """(content, tool_calls) of a generated text; no valid block gives (text, []).

    Every block must hold a JSON object with a string `name`; if any block does not, the whole text
    is plain content, as vLLM's hermes parser answers.
    """
    if START not in text:
        return text, []
    calls = []
    for match in TOOL_CALL.finditer(text):
        raw = (match.group(1) if match.group(1) is not None else match.group(2)).strip()
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            return text, []
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return text, []
        arguments = data.get("arguments", {})
        calls.append(
            {
                "id": f"chatcmpl-tool-{uuid.uuid4().hex}",
                "type": "function",
                "function": {"name": data["name"], "arguments": json.dumps(arguments, ensure_ascii=False)},
            }
        )
    # One newline before the first block is the separator templates write after the content.
    content = text[: text.index(START)].removesuffix("\n")
    return (content or None), calls


def template_tool_calls(tool_calls: Sequence[Any], where: str) -> list[dict[str, Any]]:
    """An assistant message's OpenAI `tool_calls` for the chat template: `arguments` as an object.

    OpenAI clients send arguments as a JSON string; the template renders them with `tojson`, as vLLM
    does after parsing them. A string that is not JSON is refused naming `where`.
    """
    rendered = []
    for index, call in enumerate(tool_calls):
        if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
            raise ValueError(f"{where}[{index}] must be an object with a `function` object")
        function = dict(call["function"])
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                function["arguments"] = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"{where}[{index}].function.arguments is not JSON ({error}): {arguments!r:.80}"
                ) from None
        rendered.append({**call, "function": function})
    return rendered


def template_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages for the chat template: each assistant's `tool_calls` as `template_tool_calls`."""
    return [
        {**m, "tool_calls": template_tool_calls(m["tool_calls"], f"messages[{i}].tool_calls")}
        if m.get("tool_calls")
        else m
        for i, m in enumerate(messages)
    ]
