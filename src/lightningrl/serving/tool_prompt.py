"""Tools for chat templates that have no tool section: the conversation rewritten as Qwen2.5 renders it.

A template such as SmolLM2's ChatML ignores `tools` and renders an assistant's `tool_calls` as
nothing. For such a model the server rewrites the conversation before the model's own template sees
it, into the hermes text that Qwen2.5's template produces:

- the tools go into the system message (appended after a blank line, else a new first system
  message holding only them): `TOOLS_HEADER`, one JSON object per tool per line, `TOOLS_FOOTER`;
- an assistant's `tool_calls` become `<tool_call>\\n{"name": …, "arguments": {…}}\\n</tool_call>`
  blocks after its content, newline-separated;
- `tool` messages become one `user` turn of `<tool_response>\\n…\\n</tool_response>` blocks per run of
  consecutive tool messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from transformers import PreTrainedTokenizerBase

Message = dict[str, Any]

# Qwen2.5's template text, verbatim.
TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    'within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, '
    '"arguments": <args-json-object>}\n</tool_call>'
)

CALL_START = '<tool_call>\n{"name": "'
"""How every `tool_call_block` starts: the text a forced call (`tool_choice` "required") begins with."""


_PROBE_TOOL = {
    "type": "function",
    "function": {"name": "lightningrl_probe", "description": "probe", "parameters": {"type": "object"}},
}
_PROBE_CONVERSATION = [{"role": "user", "content": "probe"}]


def _tojson(value: Any) -> str:
    """JSON as the `tojson` filter of transformers' chat templates writes it."""
    return json.dumps(value, ensure_ascii=False)


def tools_section(tools: Sequence[dict[str, Any]]) -> str:
    """The system prompt's tool section for `tools`."""
    return TOOLS_HEADER + "".join("\n" + _tojson(tool) for tool in tools) + TOOLS_FOOTER


def tool_call_block(call: dict[str, Any]) -> str:
    """One `<tool_call>` block of a template-ready call (`arguments` already an object)."""
    function = call.get("function", call)
    return (
        CALL_START
        + str(function["name"])
        + '", "arguments": '
        + _tojson(function.get("arguments", {}))
        + "}\n</tool_call>"
    )


def forced_call_prefix(tool_choice: str | dict[str, Any] | None) -> str:
    """The text the server writes for the model before it generates, for an OpenAI `tool_choice`:
    none for "auto", "none" or no choice; the start of a call for "required" (the model names the
    tool); the call up to its arguments for a named function (the model writes the arguments)."""
    if tool_choice == "required":
        return CALL_START
    if isinstance(tool_choice, dict):
        return CALL_START + str(tool_choice["function"]["name"]) + '", "arguments": '
    return ""


def renders_tools(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether the tokenizer's chat template writes the `tools` it is given into the prompt."""
    try:
        with_tool = tokenizer.apply_chat_template(_PROBE_CONVERSATION, tools=[_PROBE_TOOL], tokenize=False)
        without = tokenizer.apply_chat_template(_PROBE_CONVERSATION, tokenize=False)
    except Exception:  # a template that refuses tools, or the probe, cannot render them either
        return False
    return with_tool != without


def hermes_conversation(
    conversation: Sequence[Message], tools: Sequence[dict[str, Any]] | None
) -> list[Message]:
    """`conversation` (template-ready messages) with tools, tool calls and results as plain text turns."""
    messages: list[Message] = []
    previous = None
    for message in conversation:
        role, content = message["role"], message.get("content") or ""
        if role == "tool":
            block = "<tool_response>\n" + content + "\n</tool_response>"
            if previous == "tool":  # consecutive results share one user turn
                messages[-1]["content"] += "\n" + block
            else:
                messages.append({"role": "user", "content": block})
        elif role == "assistant" and message.get("tool_calls"):
            parts = ([content] if content else []) + [tool_call_block(c) for c in message["tool_calls"]]
            messages.append({"role": "assistant", "content": "\n".join(parts)})
        else:
            messages.append({key: value for key, value in message.items() if key != "tool_calls"})
        previous = role
    if tools:
        section = tools_section(tools)
        if messages and messages[0]["role"] == "system":
            messages[0] = {**messages[0], "content": (messages[0].get("content") or "") + "\n\n" + section}
        else:
            messages.insert(0, {"role": "system", "content": section})
    return messages


def render_chat(
    tokenizer: PreTrainedTokenizerBase,
    conversation: Sequence[Message],
    tools: Sequence[dict[str, Any]] | None,
    *,
    add_generation_prompt: bool,
    template_renders_tools: bool | None = None,
) -> str:
    """The prompt text the inference server renders for `conversation` (template-ready messages) and
    the `tools` offered: a template without a tool section gets `hermes_conversation` first."""
    tool_list = list(tools) if tools else None
    speaks_tools = bool(tool_list) or any(m["role"] == "tool" or m.get("tool_calls") for m in conversation)
    messages, offered = list(conversation), tool_list
    if speaks_tools and not (
        renders_tools(tokenizer) if template_renders_tools is None else template_renders_tools
    ):
        messages, offered = hermes_conversation(conversation, tool_list), None
    return tokenizer.apply_chat_template(
        messages, tools=offered, tokenize=False, add_generation_prompt=add_generation_prompt
    )


def _literal(text: str) -> str:
    """`text` as a Jinja string literal (JSON's escapes are Jinja's)."""
    return json.dumps(text, ensure_ascii=False)


def hermes_chat_template(model_template: str) -> str:
    """A chat template that rewrites the conversation as `hermes_conversation` does, then renders it
    with `model_template`: for an engine that renders chat itself (vLLM's `--chat-template`), so that
    a request with tools gets the same prompt text as on our server."""
    tool_response = "'<tool_response>\\n' ~ content ~ '\\n</tool_response>'"
    prefix = (
        "{%- set ns = namespace(messages=[], previous=none) -%}"
        "{%- for message in messages -%}"
        "{%- set content = message.content or '' -%}"
        "{%- if message.role == 'tool' -%}"
        "{%- set block = " + tool_response + " -%}"
        "{%- if ns.previous == 'tool' -%}"
        "{%- set ns.messages = ns.messages[:-1] + [{'role': 'user', 'content': ns.messages[-1].content"
        " ~ '\\n' ~ block}] -%}"
        "{%- else -%}"
        "{%- set ns.messages = ns.messages + [{'role': 'user', 'content': block}] -%}"
        "{%- endif -%}"
        "{%- elif message.role == 'assistant' and message.tool_calls -%}"
        "{%- set text = namespace(value=content) -%}"
        "{%- for call in message.tool_calls -%}"
        "{%- set function = call.function if call.function is defined else call -%}"
        "{%- set arguments = function.arguments if function.arguments is defined else {} -%}"
        "{%- set arguments = arguments if arguments is string else arguments | tojson -%}"
        '{%- set block = \'<tool_call>\\n{"name": "\' ~ function.name ~ \'", "arguments": \' ~ arguments'
        " ~ '}\\n</tool_call>' -%}"
        "{%- set text.value = text.value ~ '\\n' ~ block if text.value else block -%}"
        "{%- endfor -%}"
        "{%- set ns.messages = ns.messages + [{'role': 'assistant', 'content': text.value}] -%}"
        "{%- else -%}"
        "{%- set ns.messages = ns.messages + [message] -%}"
        "{%- endif -%}"
        "{%- set ns.previous = message.role -%}"
        "{%- endfor -%}"
        "{%- if tools -%}"
        "{%- set section = namespace(value=" + _literal(TOOLS_HEADER) + ") -%}"
        "{%- for tool in tools -%}{%- set section.value = section.value ~ '\\n' ~ tool | tojson -%}{%- endfor -%}"
        "{%- set section.value = section.value ~ " + _literal(TOOLS_FOOTER) + " -%}"
        "{%- if ns.messages and ns.messages[0].role == 'system' -%}"
        "{%- set ns.messages = [{'role': 'system', 'content': (ns.messages[0].content or '') ~ '\\n\\n' ~"
        " section.value}] + ns.messages[1:] -%}"
        "{%- else -%}"
        "{%- set ns.messages = [{'role': 'system', 'content': section.value}] + ns.messages -%}"
        "{%- endif -%}"
        "{%- endif -%}"
        "{%- set messages = ns.messages -%}"
    )
    return prefix + model_template
