"""Arithmetic tasks for the calculator agent: a train split and a held-out split, by seed."""

from __future__ import annotations

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
