"""The quickstart's tasks and starting checkpoint: two-digit sums and products, and SmolLM2-135M-Instruct
taught the tool-call format with the tool picked at random.

SmolLM2-135M-Instruct never calls a tool on its own (its chat template has no tool section; offered
tools as Qwen2.5 renders them, it answers in text), so `call_format_model` first fine-tunes it on a
few dozen demonstrations of the agent's own requests: a `<tool_call>` with the question's numbers and
a RANDOM tool, then the tool's result restated. That teaches the format, not which tool a question
needs: RL has to learn that. A model that already calls tools (Qwen2.5-Instruct, say) skips this.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool

from lightningrl import cached_model
from lightningrl.demos.warmup import WarmupConfig, supervised_warmup
from lightningrl.serving.tool_prompt import tool_call_block

OPS = {"plus": lambda a, b: a + b, "times": lambda a, b: a * b}
HELD_OUT = 20
"""Held-out tasks per operation: (a, b) pairs never drawn for training."""
TRAIN = 1000
"""Train tasks drawn (by seed) from the other 16,176."""


def tasks(split: str, seed: int = 0) -> list[dict[str, Any]]:
    """`a op b` for two-digit a, b: a fixed held-out set (`HELD_OUT` per operation), or `TRAIN` of the
    others drawn by `seed`; `op` is a field, so `balance_by="op"` gives per-operation success."""
    pairs = [(op, a, b) for op in OPS for a in range(10, 100) for b in range(10, 100)]
    random.Random(1000).shuffle(pairs)
    held = [p for op in OPS for p in [q for q in pairs if q[0] == op][:HELD_OUT]]
    chosen = held
    if split == "train":
        unseen = set(held)
        chosen = [p for p in pairs if p not in unseen]
        random.Random(seed).shuffle(chosen)
        chosen = chosen[:TRAIN]
    return [
        {"question": f"What is {a} {op} {b}?", "a": a, "b": b, "answer": OPS[op](a, b), "op": op}
        for op, a, b in chosen
    ]


def call_demonstrations(system: str, tools: list[Any], task: dict[str, Any], name: str) -> list[tuple]:
    """The agent's two calls on `task` as warm-up demonstrations, calling the tool `name`: its first
    request (system, question, the tools as LangChain sends them) answered by the `<tool_call>`, and
    the request after the tool's result answered by the result."""
    schemas = [convert_to_openai_tool(tool) for tool in tools]
    arguments = {"a": task["a"], "b": task["b"]}
    result = str({tool.name: tool for tool in tools}[name].invoke(arguments))
    first = [{"role": "system", "content": system}, {"role": "user", "content": task["question"]}]
    call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    second = [
        *first,
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": result},
    ]
    return [
        (first, tool_call_block({"name": name, "arguments": arguments}), schemas),
        (second, result, schemas),
    ]


def call_format_model(
    system: str,
    tools: list[Any],
    out: str | Path = "runs/quickstart/model-warmup",
    steps: int = 12,
    seed: int = 0,
) -> Path:
    """SmolLM2 taught the agent's call format with random tools (once, ~2 minutes; later calls reuse it)."""
    out = Path(out).resolve()
    if (out / "config.json").is_file():
        return out
    rng = random.Random(seed)
    names = sorted(tool.name for tool in tools)
    demos = [
        demo
        for task in rng.sample(tasks("train", seed), steps * 2)
        for demo in call_demonstrations(system, tools, task, rng.choice(names))
    ]
    model, _ = supervised_warmup(
        cached_model("smollm2"), demos, out, WarmupConfig(steps=steps, batch_size=4, lr=5e-5, seed=seed)
    )
    return model
