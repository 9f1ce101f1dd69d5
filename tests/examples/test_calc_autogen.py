"""examples/calc_autogen: an AutoGen AssistantAgent with function-calling tools, trained through `fit`.

A tiny model warmed up for a few steps on the tool-call format runs 2 RL steps through the real proxy;
the store then holds the framework's calls with their token ids (the first call's prompt exactly as the
warm-up rendered AutoGen's tools), a parsed tool call that AutoGen executed, and a non-empty update.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from lightningrl import fit
from lightningrl.credit.calls import is_llm_span
from lightningrl.demos.demonstrations import encode_demonstration
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.demos.warmup import WarmupConfig, supervised_warmup
from lightningstore import Span, SqlStore, semconv

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from examples.calc_autogen.agent import (  # noqa: E402
    SYSTEM,
    calc_autogen_agent,
    calc_autogen_mcp_agent,
    openai_tools,
    shared_workbench,
)
from examples.calc_autogen.demo import as_rows  # noqa: E402
from examples.calc_autogen.tasks import demonstrations, question_messages, split_tasks, vocabulary  # noqa: E402

CONFIG = {
    "steps": 2,
    "tasks_per_step": 2,
    "rollouts_per_task": 4,
    "val_every": 0,
    "return_to_judged_calls": False,
    "advantage": {"baseline": "group_and_call", "norm_by_std": False},
    "trainer": {"lr": 1e-3, "micro_batch_size": 64, "mini_batch_size": 16, "ppo_epochs": 1},
    "show_progress": False,
    "deterministic": True,  # seeded rollouts: the same tool calls every run, not a sampling lottery
    # The test counts its rollouts: no refills of agreeing groups, no larger groups for failing slices.
    "dynamic_sampling": False,
    "hard_slice_factor": 1,
}


def warm_tiny_model(root: Path, kind: str) -> Path:
    """A 1-layer model that writes hermes tool calls (random tool and numbers: the format is enough)."""
    tools = openai_tools(kind)
    train, _ = split_tasks(0)
    base = build_tiny_model(
        root / "base",
        seed=0,
        tokenizer_kind="word",
        extra_text=vocabulary(SYSTEM, tools),
        hidden_size=32,
        num_layers=1,
        num_heads=2,
    )
    first_calls = demonstrations(train, 0, 200, SYSTEM, tools)[::2]
    warm, _ = supervised_warmup(
        base,
        first_calls,
        root / "warm",
        WarmupConfig(steps=150, batch_size=8, lr=1e-2, seed=0),
        show_progress=False,
    )
    return warm


def read_spans(db: Path) -> dict[str, list[Span]]:
    async def read() -> dict[str, list[Span]]:
        store = SqlStore(db)
        try:
            rollouts = await store.query_rollouts()
            return {r.rollout_id: await store.query_spans(r.rollout_id) for r in rollouts}
        finally:
            await store.close()

    return asyncio.run(read())


def check_run(out: Path, model: Path, kind: str, result) -> None:
    tools = openai_tools(kind)
    tokenizer = AutoTokenizer.from_pretrained(model)
    rollouts = read_spans(out / "store.db")
    assert len(rollouts) == CONFIG["steps"] * CONFIG["tasks_per_step"] * CONFIG["rollouts_per_task"]
    executed = 0
    for spans in rollouts.values():
        calls = sorted((s for s in spans if is_llm_span(s)), key=lambda s: s.sequence_id)
        assert calls, "every rollout made at least one model call through the proxy"
        for call in calls:
            assert (
                call.attributes[semconv.LLM_PROMPT_TOKEN_IDS]
                and call.attributes[semconv.LLM_RESPONSE_TOKEN_IDS]
            )
        # the proxy saw exactly the prompt the warm-up trains on: AutoGen's tools rendered by the template
        question = json.loads(calls[0].attributes[semconv.LLM_REQUEST_MESSAGES])[-1]["content"]
        expected, _ = encode_demonstration(tokenizer, question_messages(SYSTEM, question), "", tools)
        assert list(calls[0].attributes[semconv.LLM_PROMPT_TOKEN_IDS]) == expected
        names = {s.name for s in spans}
        assert "invoke_agent calculator" in names  # AutoGen's own GenAI span joined the attempt
        if any(name.startswith("execute_tool ") for name in names):  # AutoGen ran a parsed tool call
            executed += 1
            assert len(calls) == 2  # then the reflection call answered with the tool's result
            assert "<tool_response>" in tokenizer.decode(calls[1].attributes[semconv.LLM_PROMPT_TOKEN_IDS])
            # the server parsed the hermes block out of the text into OpenAI tool_calls; the text
            # before it (if the tiny model wrote any) stays the content
            generated = tokenizer.decode(calls[0].attributes[semconv.LLM_RESPONSE_TOKEN_IDS])
            content = calls[0].attributes[semconv.LLM_RESPONSE_TEXT]
            assert generated.startswith(content + "<tool_call>")
    assert executed > 0, "no rollout's tool call was parsed and executed"
    updates = [row for row in result.metrics if "update/sequences" in row]
    assert updates and all(row["update/sequences"] > 0 for row in updates)
    # (an untrained model's groups are often all 0: the update is then skipped, saying why)
    assert all(row.get("actor/sequences", 0) > 0 or row.get("update/reason") for row in updates)


@pytest.mark.parametrize("kind", ["python", pytest.param("mcp", marks=pytest.mark.slow)])
def test_calc_autogen_trains_through_the_proxy(kind: str, tmp_path: Path) -> None:
    model = warm_tiny_model(tmp_path, kind)
    train, _ = split_tasks(0)
    out = tmp_path / "run"
    result = fit(
        calc_autogen_mcp_agent if kind == "mcp" else calc_autogen_agent,
        as_rows(train),
        None,
        model=model,
        config=CONFIG,
        workers=8,
        runner_processes=1,
        engine="ours",
        output_dir=out,
    )
    check_run(out, model, kind, result)


def test_mcp_server_serves_the_same_tools() -> None:
    async def ask() -> tuple[list[str], bool, str]:
        workbench = await shared_workbench()
        try:
            listed = await workbench.list_tools()
            result = await workbench.call_tool("sub", {"a": 3, "b": 7})
            return [t["name"] for t in listed], result.is_error, result.to_text()
        finally:
            await workbench.stop()

    assert asyncio.run(ask()) == (["add", "sub", "mul"], False, "-4")
    assert [t["function"]["description"] for t in openai_tools("mcp")] == [
        t["function"]["description"] for t in openai_tools("python")
    ]
