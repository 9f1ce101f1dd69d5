"""The calculator tasks of examples/calc (same generator, same seeded split over unseen (a, op, b)
triples), with warm-up demonstrations and vocabulary for AutoGen's function-calling prompts."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from examples.calc.tasks import OPS, TEMPLATES, CalcTask, all_tasks, split_tasks  # noqa: E402

__all__ = [
    "OPS",
    "TEMPLATES",
    "CalcTask",
    "all_tasks",
    "split_tasks",
    "thought_text",
    "tool_call_text",
    "demonstrations",
    "vocabulary",
]

TOOL_NAMES = ("add", "sub", "mul")
RESULTS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}
# What the tinylm chat template (hermes style, as vLLM's parser expects) writes around tools.
TEMPLATE_TEXT = (
    "# Tools\n<tools>\n</tools>\nTo call a tool, answer <tool_call>\n"
    '{"name": <name>, "arguments": <object>}\n</tool_call>\n<tool_response>\n-3\n</tool_response>'
)


def thought_text(op: str, tool: str) -> str:
    """What the model writes before its call: the operation word, then the tool it picks (`plus add`).

    The tool is decided right after the restated operation word, where a 2-layer model learns the
    mapping with RL (as in examples/calc), and the call then copies it (the warm-up teaches the copy,
    with the tool at random). ` add`, with its space, is a token that only the thought contains."""
    return f"{op} {tool}"


def tool_call_text(tool: str, a: int, b: int) -> str:
    """A tool call as the model writes it and as the chat template renders it back (hermes block)."""
    return "<tool_call>\n" + json.dumps({"name": tool, "arguments": {"a": a, "b": b}}) + "\n</tool_call>"


def question_messages(system: str, question: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def answer_messages(
    system: str, question: str, thought: str, tool: str, a: int, b: int, result: str
) -> list[dict[str, Any]]:
    """The reflection call's messages as AutoGen sends them: the thought and call, then its result."""
    call = {"id": "call", "type": "function", "function": {"name": tool, "arguments": {"a": a, "b": b}}}
    return [
        *question_messages(system, question),
        {"role": "assistant", "content": thought, "tool_calls": [call]},
        {"role": "tool", "content": result, "tool_call_id": "call"},
    ]


def demonstrations(
    tasks: list[CalcTask], seed: int, count: int, system: str, tools: list[dict[str, Any]]
) -> list[tuple]:
    """Warm-up data: the tool-call format and copying, with the tool picked AT RANDOM (so it does not
    solve the task). `tools` are the OpenAI tool definitions the agent sends: the first call's prompt
    lists them, the reflection call (AutoGen sends no tools there) does not."""
    rng = random.Random(seed)
    out: list[tuple] = []
    for _ in range(count):
        task = rng.choice(tasks)
        tool = rng.choice(TOOL_NAMES)
        result = str(RESULTS[tool](task.a, task.b))
        thought = thought_text(task.op, tool)
        call = thought + tool_call_text(tool, task.a, task.b)
        out.append((question_messages(system, task.question), call, tools))
        out.append((answer_messages(system, task.question, thought, tool, task.a, task.b, result), result))
    return out


def vocabulary(system: str, tools: list[dict[str, Any]]) -> list[str]:
    """Text that puts every piece of the prompts and completions into the word tokenizer as one token."""
    lines = [system, TEMPLATE_TEXT, *TEMPLATES, *OPS]
    lines += [json.dumps(tool, ensure_ascii=False) for tool in tools]
    lines += [thought_text(op, tool) + tool_call_text(tool, 3, 4) for op in OPS for tool in TOOL_NAMES]
    return lines
