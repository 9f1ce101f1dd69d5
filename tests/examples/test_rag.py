"""examples/rag: the OpenAI Agents SDK retrieval agent trains through `fit` and the real LLM proxy.

A tiny model, warmed up briefly on the example's demonstrations, runs 2 RL steps. The store then
holds, for the SDK's model calls, the proxy's spans with exact token ids; the first call's prompt ids
are those the warm-up trained on (the SDK's request, tools included, renders as our demonstrations
do); a `<tool_call>` the model wrote was parsed into OpenAI `tool_calls` and the search tool ran
(the next call's request carries its result as a `tool` message); and every step trained on a
non-empty batch.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from transformers import AutoTokenizer

from examples.rag.agent import rag_agent
from examples.rag.tasks import (
    conversation,
    demonstrations,
    split_tasks,
    thought_text,
    tool_call_text,
    tool_params,
    vocabulary,
)
from lightningrl import fit
from lightningrl.credit.calls import is_llm_span
from lightningrl.demos.demonstrations import encode_demonstration
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.demos.warmup import WarmupConfig, supervised_warmup
from lightningrl.serving.protocol import ChatCompletionRequest
from lightningrl.serving.service import chat_encoder
from lightningrl.serving.tool_prompt import renders_tools
from lightningstore import Span, SqlStore, semconv

SEED = 0


def rows(tasks: list) -> list[dict]:
    return [{"task_id": t.task_id, "input": t.as_input(), "tags": {"kind": t.kind}} for t in tasks]


@pytest.fixture(scope="module")
def warm_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rag")
    world, train, _ = split_tasks(SEED)
    base = build_tiny_model(
        root / "base",
        seed=SEED,
        tokenizer_kind="word",
        extra_text=vocabulary(),
        hidden_size=64,
        num_layers=1,
        num_heads=2,
    )
    warm, _ = supervised_warmup(
        base,
        demonstrations(train, SEED, 200),
        root / "warm",
        WarmupConfig(steps=150, batch_size=16, lr=1e-2, seed=SEED),
        show_progress=False,
    )
    return warm


def test_warmup_renders_tools_and_tool_calls_as_the_server_does(tmp_path: Path) -> None:
    """A demonstration after one search: the same prompt ids as the server's for the SDK's request,
    and the model's call renders back exactly as the completion the warm-up teaches."""
    model = build_tiny_model(
        tmp_path / "m",
        tokenizer_kind="word",
        extra_text=vocabulary(),
        hidden_size=32,
        num_layers=1,
        num_heads=2,
    )
    tokenizer = AutoTokenizer.from_pretrained(model)
    world, train, _ = split_tasks(SEED)
    task = next(t for t in train if t.hops == 2)
    thought = thought_text("founder", "companies")
    searches = [(thought, "companies", task.entity, world.search("companies", task.entity))]
    messages = conversation(task.question, searches)
    request = ChatCompletionRequest(model="m", messages=messages, tools=tool_params())
    # The encoder reads what a LoadedModel knows of its template (the tinylm one renders tools itself).
    loaded = SimpleNamespace(tokenizer=tokenizer, template_renders_tools=renders_tools(tokenizer))
    server = chat_encoder(request.messages, True, request.tools)(loaded)[0]
    prompt, _ = encode_demonstration(tokenizer, messages, "x", tool_params())
    assert prompt == server
    text = tokenizer.decode(prompt)
    assert thought + tool_call_text("companies", task.entity) + "<|im_end|>" in text
    assert searches[0][3] in text and "search_people" in text


def read_run(db: Path) -> tuple[dict[str, list[Span]], dict[str, dict]]:
    """Spans of every train rollout (latest attempt) and each rollout's input."""

    async def read() -> tuple[dict[str, list[Span]], dict[str, dict]]:
        store = SqlStore(db)
        try:
            rollouts = await store.query_rollouts(mode="train")
            spans = await store.query_spans_many([r.rollout_id for r in rollouts])
            return spans, {r.rollout_id: r.input for r in rollouts}
        finally:
            await store.close()

    return asyncio.run(read())


@pytest.mark.slow
def test_rag_agent_trains_through_the_proxy(warm_model: Path, tmp_path: Path) -> None:
    world, train, _ = split_tasks(SEED)
    result = fit(
        rag_agent,
        rows(train),
        model=warm_model,
        config={
            "steps": 2,
            "tasks_per_step": 3,
            "rollouts_per_task": 4,
            "val_every": 0,
            "validate_first": False,
            "balance_by": "kind",
            "return_to_judged_calls": False,
            "show_progress": False,
            # Seeded sampling: after 60 warm-up steps one CI run in several sampled no well-formed
            # search at all; these rollouts are now the same every run (31 searches run here).
            "dynamic_sampling": False,  # the test counts rollouts and their calls
            "hard_slice_factor": 1,
            "deterministic": True,
        },
        workers=6,
        runner_processes=1,
        engine="ours",
        output_dir=tmp_path / "run",
    )
    steps = [r for r in result.metrics if int(r["step"]) > 0]
    assert len(steps) == 2
    assert all(r["update/sequences"] > 0 for r in steps), steps

    spans_by_rollout, inputs = read_run(tmp_path / "run" / "store.db")
    assert len(spans_by_rollout) == 2 * 3 * 4
    tokenizer = AutoTokenizer.from_pretrained(warm_model)
    tools = tool_params()
    executed = 0
    for rollout_id, spans in spans_by_rollout.items():
        calls = [s for s in spans if is_llm_span(s)]
        assert calls, f"{rollout_id}: no LLM call recorded"
        for call in calls:
            attributes = call.attributes
            assert call.resource["service.name"] == "lightningstore.proxy"
            assert attributes[semconv.LLM_PROMPT_TOKEN_IDS] and attributes[semconv.LLM_RESPONSE_TOKEN_IDS]
            assert attributes[semconv.LLM_TRAINABLE] is True
        # the SDK's first request (system, question, tools) is what the warm-up encoded
        question = inputs[rollout_id]["question"]
        prompt, _ = encode_demonstration(tokenizer, conversation(question, []), "", tools)
        assert calls[0].attributes[semconv.LLM_PROMPT_TOKEN_IDS] == prompt
        # a tool call parsed by the server and run by the SDK: the next request carries its result
        for call, following in zip(calls, calls[1:], strict=False):
            messages = json.loads(following.attributes[semconv.LLM_REQUEST_MESSAGES])
            if messages[-1]["role"] != "tool":
                continue
            assert list(call.attributes[semconv.GEN_AI_FINISH_REASONS]) == ["tool_calls"]
            (tool_call,) = messages[-2]["tool_calls"]
            name = tool_call["function"]["name"]
            assert name in ("search_companies", "search_people")
            arguments = json.loads(tool_call["function"]["arguments"])
            if set(arguments) != {"query"}:  # a barely warmed model's slip: the SDK answered an error
                continue
            assert messages[-1]["content"] == world.search(name.removeprefix("search_"), arguments["query"])
            executed += 1
    assert executed > 0, "no search was parsed and executed"


def test_natural_split_holds_out_whole_worlds_and_right_searches_answer_every_question() -> None:
    """The real model's tasks: held-out questions come from worlds never trained on (≥ 100, every kind);
    the warm-up's chain of searches, with the right collections, ends on every question's answer."""
    from examples.rag.tasks import KINDS, natural_demonstrations, natural_split

    train, heldout = natural_split(SEED)
    assert len(heldout) >= 100 and {t.kind for t in heldout} == set(KINDS)
    assert not {t.world for t in train} & {t.world for t in heldout}
    world = [t for t in heldout if t.world == heldout[0].world]  # a question is asked once a world
    right = natural_demonstrations(world, SEED, 400, random_collection=False)
    answers = [(m[1]["content"], text) for m, text, _ in right if not text.startswith("<tool_call>")]
    gold = {t.question: t.answer for t in world}
    assert len(answers) > 100 and all(text == gold[question] for question, text in answers)
    assert len({text for _, text in answers}) > 5  # people and cities, not one name
    calls = [
        text for _, text, _ in natural_demonstrations(train, SEED, 200) if text.startswith("<tool_call>")
    ]
    assert {json.loads(c.split("\n")[1])["name"] for c in calls} == {"search_companies", "search_people"}
