"""Token accounting on the real SmolLM2 tokenizer (49k BPE): mismatch figures, retokenization drift and
prefix continuity, each on constructed cases where the answer is known."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from lightningrl.accounting import logprob_mismatch, retokenization_drift, token_row
from lightningrl.credit import assign_credit
from lightningrl.models import cached_model
from lightningrl.serving.tool_calls import template_messages
from lightningrl.serving.tool_prompt import render_chat
from lightningstore import semconv
from lightningstore.data.span import Span

_seq = itertools.count(1)


@pytest.fixture(scope="module")
def smollm2() -> Path:
    return cached_model("smollm2")


@pytest.fixture(scope="module")
def tokenizer(smollm2: Path):
    return AutoTokenizer.from_pretrained(smollm2)


def call_span(
    messages: list[dict],
    prompt: list[int],
    response: list[int],
    *,
    tools: list | None = None,
    rollout: str = "r1",
) -> Span:
    attributes = {
        semconv.GEN_AI_OPERATION: "chat",
        semconv.LLM_REQUEST_MESSAGES: json.dumps(messages),
        semconv.LLM_PROMPT_TOKEN_IDS: prompt,
        semconv.LLM_RESPONSE_TOKEN_IDS: response,
        semconv.LLM_RESPONSE_LOGPROBS: [-0.5] * len(response),
        semconv.LLM_TRAINABLE: True,
    }
    if tools:
        attributes[semconv.LLM_REQUEST_TOOLS] = json.dumps(tools)
    return Span(
        rollout_id=rollout,
        attempt_id="a1",
        trace_id="t1",
        span_id=f"s{next(_seq)}",
        name="chat",
        attributes=attributes,
        sequence_id=next(_seq),
    )


def rendered(tokenizer, messages: list[dict], tools: list | None = None) -> list[int]:
    """The prompt ids the inference server renders (tools written in for a template without them)."""
    text = render_chat(tokenizer, messages, tools, add_generation_prompt=True)
    return tokenizer.encode(text, add_special_tokens=False)


def test_mismatch_figures_on_known_gaps() -> None:
    trainer = torch.tensor([[-1.0, -2.0, -3.0, 0.0]])
    server = torch.tensor([[-1.0, -2.5, -2.0, -9.0]])
    mask = torch.tensor([[1, 1, 1, 0]])  # the last token is padding: not counted
    figures = logprob_mismatch(trainer, server, mask)
    assert figures["tokens"] == 3
    assert figures["abs_mean"] == pytest.approx(0.5) and figures["abs_max"] == pytest.approx(1.0)
    k3 = [(math.exp(r) - 1 - r) for r in (0.0, 0.5, -1.0)]
    assert figures["k3_kl"] == pytest.approx(sum(k3) / 3)
    same = logprob_mismatch(trainer, trainer.clone(), mask)
    assert same["abs_mean"] == same["abs_max"] == same["k3_kl"] == 0.0
    with pytest.raises(ValueError, match="must match"):
        logprob_mismatch(trainer, server[:, :3], mask)


def test_our_own_ids_give_zero_drift(tokenizer) -> None:
    messages = [{"role": "user", "content": "What is 17 plus 25?"}]
    answer = tokenizer.encode("17 + 25 = 42", add_special_tokens=False) + [tokenizer.eos_token_id]
    counts = retokenization_drift([call_span(messages, rendered(tokenizer, messages), answer)], tokenizer)
    assert (counts.calls, counts.response_drift, counts.prompt_checked, counts.prompt_drift) == (1, 0, 1, 0)


def test_a_non_canonical_tokenization_is_counted(tokenizer) -> None:
    messages = [{"role": "user", "content": "Spell it."}]
    canonical = tokenizer.encode(" understanding", add_special_tokens=False)
    # The same text, one character per token: a sampled sequence BPE would never produce by encoding.
    spelled = [tokenizer.convert_tokens_to_ids(t) for t in tokenizer.tokenize(" ")] + [
        tokenizer.convert_tokens_to_ids(c) for c in "understanding"
    ]
    assert tokenizer.decode(spelled) == tokenizer.decode(canonical) and spelled != canonical
    prompt = rendered(tokenizer, messages)
    counts = retokenization_drift(
        [call_span(messages, prompt, spelled), call_span(messages, prompt, canonical)], tokenizer
    )
    assert counts.calls == 2 and counts.response_drift == 1
    assert counts.shares()["response_drift"] == 0.5


def test_a_prompt_the_template_would_render_differently_is_counted(tokenizer) -> None:
    messages = [{"role": "user", "content": "What is 1 plus 2?"}]
    # The ids the server saw had an explicit system prompt; the recorded messages (what a retokenizing
    # system rebuilds from) do not, so the template adds SmolLM's default system prompt instead.
    seen = rendered(tokenizer, [{"role": "system", "content": "Be brief."}, *messages])
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    plain = rendered(tokenizer, messages)
    # ChatML has no tool section: the server writes the tools into the prompt (tool_prompt), and so
    # does a re-render of the recorded request.
    with_tools = rendered(tokenizer, messages, tools)
    assert len(with_tools) > len(plain) + 50
    # The model wrote its call without spaces; the recorded message holds the parsed call, which
    # renders back spaced: a system that rebuilds the next prompt from it trains on other ids.
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
    turn = [*messages, {"role": "assistant", "content": None, "tool_calls": [call]}]
    turn += [{"role": "tool", "tool_call_id": "c1", "content": "3"}]
    written = with_tools + tokenizer.encode(
        text='<tool_call>\n{"name":"add","arguments":{"a":1,"b":2}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n3\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
        add_special_tokens=False,
    )
    as_rendered = rendered(tokenizer, template_messages(turn), tools)
    answer = tokenizer.encode("3", add_special_tokens=False)
    counts = retokenization_drift(
        [
            call_span(messages, seen, answer),  # drift
            call_span(messages, plain, answer),
            call_span(messages, with_tools, answer, tools=tools),
            call_span(messages, plain, answer, tools=tools),  # drift: the tools were not in the prompt
            call_span(turn, as_rendered, answer, tools=tools),
            call_span(turn, written, answer, tools=tools),  # drift: the call's JSON re-spaced
        ],
        tokenizer,
    )
    assert counts.prompt_checked == 6 and counts.prompt_drift == 3


def test_a_forced_calls_start_is_part_of_the_rerendered_prompt(tokenizer) -> None:
    """The server writes a forced call's start after the generation prompt (`tool_choice`); the span
    records the choice, so a re-render from the request gives the same ids."""
    messages = [{"role": "user", "content": "What is 1 plus 2?"}]
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    named = {"type": "function", "function": {"name": "add"}}
    text = render_chat(tokenizer, messages, tools, add_generation_prompt=True)
    answer = tokenizer.encode("3", add_special_tokens=False)
    spans = []
    for choice, forced in (
        ("required", '<tool_call>\n{"name": "'),
        (named, '<tool_call>\n{"name": "add", "arguments": '),
    ):
        ids = tokenizer.encode(text + forced, add_special_tokens=False)
        recorded = call_span(messages, ids, answer, tools=tools)
        recorded.attributes[semconv.LLM_REQUEST_TOOL_CHOICE] = json.dumps(choice)
        unrecorded = call_span(messages, ids, answer, tools=tools)  # drift: the forced start is not known
        spans += [recorded, unrecorded]
    none = call_span(messages, rendered(tokenizer, messages, tools), answer, tools=tools)
    none.attributes[semconv.LLM_REQUEST_TOOL_CHOICE] = json.dumps("none")
    counts = retokenization_drift([*spans, none], tokenizer)
    assert counts.prompt_checked == 5 and counts.prompt_drift == 2


def test_prefix_continuity_counts_rollouts_whose_calls_merge(tokenizer, smollm2: Path) -> None:
    first_messages = [{"role": "user", "content": "Name a fruit."}]
    first_prompt = rendered(tokenizer, first_messages)
    reply = tokenizer.encode("Apple", add_special_tokens=False) + [tokenizer.eos_token_id]
    second_messages = [
        *first_messages,
        {"role": "assistant", "content": "Apple"},
        {"role": "user", "content": "Another."},
    ]
    second_prompt = rendered(tokenizer, second_messages)
    assert second_prompt[: len(first_prompt) + len(reply)] == first_prompt + reply  # ChatML continues
    merged = [
        call_span(first_messages, first_prompt, reply, rollout="r1"),
        call_span(second_messages, second_prompt, reply, rollout="r1"),
    ]
    # Sampled one character a token: the next prompt, rendered from the text, holds other ids.
    spelled = [tokenizer.convert_tokens_to_ids(c) for c in "Apple"] + [tokenizer.eos_token_id]
    assert tokenizer.decode(spelled) == tokenizer.decode(reply) and spelled != reply
    drifted = [
        call_span(first_messages, first_prompt, spelled, rollout="r2"),
        call_span(second_messages, second_prompt, reply, rollout="r2"),
    ]
    report = assign_credit(merged, []).report + assign_credit(drifted, []).report
    assert (report.multi_call_rollouts, report.multi_call_rollouts_merged) == (2, 1)
    row = token_row(merged + drifted, report, str(smollm2))
    assert row["tokens/prefix_continuity"] == 0.5
    assert row["tokens/drift_calls"] == 4 and row["tokens/response_drift"] == 0.25
