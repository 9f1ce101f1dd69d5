"""Arithmetic tasks for the calculator agent: a train split and a held-out split, by seed."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

OPS = {"plus": "add", "minus": "sub", "times": "mul"}
TOOLS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}
TEMPLATES = ("What is {a} {op} {b}?", "Compute {a} {op} {b}.", "Tell me {a} {op} {b}.")
SYSTEM = "Tools: add, sub, mul. Reply with the operation, a tool and two numbers."


@dataclass(frozen=True)
class CalcTask:
    task_id: str
    question: str
    a: int
    b: int
    op: str
    answer: int

    def as_input(self) -> dict:
        return {
            "task_id": self.task_id,
            "question": self.question,
            "a": self.a,
            "b": self.b,
            "op": self.op,
            "answer": self.answer,
        }


def all_tasks(max_operand: int = 9) -> list[CalcTask]:
    tasks = []
    for op, tool in OPS.items():
        for a in range(max_operand + 1):
            for b in range(max_operand + 1):
                for k, template in enumerate(TEMPLATES):
                    tasks.append(
                        CalcTask(
                            f"{op}-{a}-{b}-{k}", template.format(a=a, op=op, b=b), a, b, op, TOOLS[tool](a, b)
                        )
                    )
    return tasks


def split_tasks(seed: int, heldout_fraction: float = 0.2) -> tuple[list[CalcTask], list[CalcTask]]:
    """A seeded split over (a, op, b) triples, so held-out questions are unseen in every phrasing."""
    rng = random.Random(seed)
    tasks = all_tasks()
    triples = sorted({(t.op, t.a, t.b) for t in tasks})
    rng.shuffle(triples)
    held = set(triples[: int(len(triples) * heldout_fraction)])
    train = [t for t in tasks if (t.op, t.a, t.b) not in held]
    heldout = [t for t in tasks if (t.op, t.a, t.b) in held]
    return train, heldout


def tool_messages(question: str, system: str = SYSTEM) -> list[dict[str, str]]:
    """The first call: pick a tool."""
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def answer_messages(question: str, tool_call: str, result: str, system: str = SYSTEM) -> list[dict[str, str]]:
    """The second call: answer with the tool's result."""
    return [
        *tool_messages(question, system),
        {"role": "assistant", "content": tool_call},
        {"role": "user", "content": f"result {result}"},
    ]


def run_tool(tool_call: str) -> str:
    """Execute `plus add 3 4`-style calls (the operation restated, then tool and numbers)."""
    parts = tool_call.strip().split()
    if len(parts) != 4 or parts[1] not in TOOLS:
        return "error"
    parts = parts[1:]
    try:
        a, b = int(parts[1]), int(parts[2])
    except ValueError:
        return "error"
    return str(TOOLS[parts[0]](a, b))


def demonstrations(tasks: list[CalcTask], seed: int, count: int) -> list[tuple[list[dict[str, str]], str]]:
    """Warm-up data: the format and copying, with the tool picked AT RANDOM (so it does not solve the task)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        task = rng.choice(tasks)
        tool = rng.choice(list(TOOLS))
        call = f"{task.op} {tool} {task.a} {task.b}"
        out.append((tool_messages(task.question), call))
        out.append((answer_messages(task.question, call, run_tool(call)), run_tool(call)))
    return out


def vocabulary() -> list[str]:
    """Text that puts every word of the task into the tokenizer as one token."""
    lines = [SYSTEM, "result error", *TEMPLATES]
    lines += [f"{op} {tool}" for op, tool in OPS.items()]
    return lines


# The same task for a real pretrained model (examples/calc/demo_smollm2.py): two-digit numbers, the
# tools offered as OpenAI functions, a tool call as the model's chat template writes one.
FUNCTIONS = {
    "add": "Add two integers: a + b.",
    "sub": "Subtract two integers: a - b.",
    "mul": "Multiply two integers: a * b.",
}
TOOL_SYSTEM = (
    "You are a calculator assistant. Call a tool to compute the answer, then reply with just the number."
)
TOOL_SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
    for name, description in FUNCTIONS.items()
]


def two_digit_split(seed: int, heldout_per_op: int = 40) -> tuple[list[CalcTask], list[CalcTask]]:
    """Operands 10-99: the same held-out tasks for every seed (`heldout_per_op` per operation, one
    phrasing each), the train tasks every other (op, a, b) in a seeded order."""
    triples = [(op, a, b) for op in OPS for a in range(10, 100) for b in range(10, 100)]
    random.Random(1000).shuffle(triples)
    held: list[tuple[str, int, int]] = []
    for op in OPS:
        held += [t for t in triples if t[0] == op][:heldout_per_op]
    chosen = set(held)
    rest = [t for t in triples if t not in chosen]
    random.Random(seed).shuffle(rest)

    def task(i: int, op: str, a: int, b: int) -> CalcTask:
        template = TEMPLATES[i % len(TEMPLATES)]
        return CalcTask(f"{op}-{a}-{b}", template.format(a=a, op=op, b=b), a, b, op, TOOLS[OPS[op]](a, b))

    return [task(i, *t) for i, t in enumerate(rest)], [task(i, *t) for i, t in enumerate(held)]


def function_result(name: str, arguments: str) -> str:
    """Execute an OpenAI function call (`arguments` a JSON string) on the calculator's tools."""
    try:
        args = json.loads(arguments)
        return str(TOOLS[name](int(args["a"]), int(args["b"])))
    except (KeyError, TypeError, ValueError):
        return "error"


def tool_demonstrations(
    tasks: list[CalcTask],
    seed: int,
    count: int,
    random_tool: bool = False,
    *,
    system: str = TOOL_SYSTEM,
    tools: list[dict] = TOOL_SCHEMAS,
    answers: bool = True,
) -> list[tuple]:
    """Warm-up data for the real model: the tool-call format and, with `answers`, copying the result;
    the tool the operation needs, or with `random_tool` one picked AT RANDOM (the format only;
    each tool once in every round of len(TOOLS) demonstrations).

    `system` and `tools` are what the agent sends with its first call (an AutoGen agent's own
    converted FunctionTools, say); without `answers` only first calls are demonstrated (an agent that
    returns the tool's result makes no second call)."""
    from lightningrl.serving.tool_prompt import tool_call_block  # transformers: not for the agent's import

    rng = random.Random(seed)
    out: list[tuple] = []
    shuffled_round: list[str] = []
    for _ in range(count // 2 if answers else count):
        task = rng.choice(tasks)
        # every tool once a round: a uniform marginal, not a skewed draw
        if random_tool and not shuffled_round:
            shuffled_round = rng.sample(list(TOOLS), len(TOOLS))
        name = shuffled_round.pop() if random_tool else OPS[task.op]
        arguments = json.dumps({"a": task.a, "b": task.b})
        call = {"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}
        first = tool_messages(task.question, system)
        # the text the model writes for this call: the server renders it back the same way
        block = tool_call_block({"name": name, "arguments": json.loads(arguments)})
        out.append((first, block, tools))
        if not answers:
            continue
        result = function_result(name, arguments)
        second = [
            *first,
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_0", "content": result},
        ]
        out.append((second, result, tools))
    return out
