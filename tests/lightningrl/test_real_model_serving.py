"""Our inference server on the real SmolLM2-135M-Instruct: exact ids, sampling, stop at `<|im_end|>`,
and tools on a chat template that has no tool section (rendered as Qwen2.5 does, parsed back)."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from engine_stack import TOOLS, Live, serve
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from lightningrl.demos.tinylm.tokenizer import CHAT_TEMPLATE as TINYLM_TEMPLATE
from lightningrl.models import cached_model
from lightningrl.serving import create_app
from lightningrl.serving.tool_calls import parse_tool_calls
from lightningrl.serving.tool_prompt import hermes_conversation, renders_tools, tool_call_block, tools_section

IM_END = 2
QUESTION = [{"role": "user", "content": "What is 17 plus 25? Answer with just the number."}]
SYSTEM = {"role": "system", "content": "You add numbers with the tools you are given."}
ASK = {"role": "user", "content": "Add 17 and 25."}
CALL = {"name": "add", "arguments": {"a": 17, "b": 25}}
TOOLS_TEXT = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    '{"type": "function", "function": {"name": "add", "description": "Add two integers.", "parameters": '
    '{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, '
    '"required": ["a", "b"]}}}\n</tools>\n\n'
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


@pytest.fixture(scope="module")
def smollm2() -> Path:
    return cached_model("smollm2")


@pytest.fixture(scope="module")
def tokenizer(smollm2: Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(smollm2)


@pytest.fixture(scope="module")
def reference(smollm2: Path) -> Iterator[PreTrainedModel]:
    """The checkpoint loaded a second time, for a plain forward pass (one torch thread, as the server)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32).eval()
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def server(smollm2: Path) -> Iterator[Live]:
    # One generation thread: on a shared 2-core machine two threads wait on each other at every op
    # (measured here at load average 6: 12 tokens in 1.0-1.5 s on one thread, 8-10 s on two).
    live = serve(create_app(smollm2, device="cpu", batch_wait_ms=5, cpu_threads=1), "smollm2-server")
    yield live
    live.stop()


@pytest.fixture
async def http(server: Live) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url + "/v1", timeout=120) as client:
        yield client


async def _chat(http: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await http.post("/chat/completions", json={"return_token_ids": True, **body})
    assert response.status_code == 200, response.text
    return response.json()


def _chat_ids(tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, Any]]) -> list[int]:
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)


@torch.inference_mode()
def _logprobs(model: PreTrainedModel, prompt_ids: list[int], token_ids: list[int]) -> list[float]:
    logits = model(torch.tensor([prompt_ids + token_ids])).logits[0].float()
    steps = torch.log_softmax(logits[len(prompt_ids) - 1 : -1], dim=-1)
    return steps.gather(1, torch.tensor(token_ids)[:, None]).squeeze(1).tolist()


def test_the_template_has_no_tool_section_so_tools_render_as_qwen25s(
    tokenizer: PreTrainedTokenizerBase,
) -> None:
    assert not renders_tools(tokenizer)
    tinylm = copy.deepcopy(tokenizer)
    tinylm.chat_template = TINYLM_TEMPLATE
    assert renders_tools(tinylm)  # a template with a tool section is left to render them itself

    assert tools_section(TOOLS) == TOOLS_TEXT
    conversation = [
        SYSTEM,
        {"role": "user", "content": "Add 17 and 25, and 1 and 2."},
        {
            "role": "assistant",
            "content": "Adding.",
            "tool_calls": [{"function": CALL}, {"function": {**CALL, "arguments": {"a": 1, "b": 2}}}],
        },
        {"role": "tool", "tool_call_id": "a", "content": "42"},
        {"role": "tool", "tool_call_id": "b", "content": "3"},
        {"role": "assistant", "content": "42 and 3."},
    ]
    rendered = tokenizer.apply_chat_template(hermes_conversation(conversation, TOOLS), tokenize=False)
    assert rendered == (
        "<|im_start|>system\nYou add numbers with the tools you are given.\n\n" + TOOLS_TEXT + "<|im_end|>\n"
        "<|im_start|>user\nAdd 17 and 25, and 1 and 2.<|im_end|>\n"
        "<|im_start|>assistant\nAdding.\n"
        '<tool_call>\n{"name": "add", "arguments": {"a": 17, "b": 25}}\n</tool_call>\n'
        '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n42\n</tool_response>\n<tool_response>\n3\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n42 and 3.<|im_end|>\n"
    )
    # No system message: the tools become the first one (SmolLM2's default system prompt is not added).
    alone = tokenizer.apply_chat_template(hermes_conversation([ASK], TOOLS), tokenize=False)
    assert (
        alone
        == "<|im_start|>system\n" + TOOLS_TEXT + "<|im_end|>\n<|im_start|>user\nAdd 17 and 25.<|im_end|>\n"
    )


def test_the_models_tool_call_text_parses_into_openai_tool_calls() -> None:
    canonical = tool_call_block({"function": CALL})
    for text, content in [
        (canonical, None),
        ("Let me add them.\n" + canonical, "Let me add them."),
        ('<tool_call>{"name": "add", "arguments": {"a": 17, "b": 25}}</tool_call>\n', None),
        ('<tool_call>\n  {"name": "add",\n "arguments": {"a": 17, "b": 25}}  \n\n</tool_call>', None),
        (canonical + "\n" + canonical, None),
    ]:
        parsed, calls = parse_tool_calls(text)
        assert parsed == content, text
        assert calls and all(c["type"] == "function" and c["function"]["name"] == "add" for c in calls)
        assert all(json.loads(c["function"]["arguments"]) == CALL["arguments"] for c in calls)
    assert len(parse_tool_calls(canonical + "\n" + canonical)[1]) == 2


async def test_greedy_answer_has_exact_ids_and_stops_at_im_end(
    http: httpx.AsyncClient, tokenizer: PreTrainedTokenizerBase
) -> None:
    body = await _chat(http, messages=QUESTION, max_tokens=32, temperature=0)
    choice = body["choices"][0]
    assert body["prompt_token_ids"] == _chat_ids(tokenizer, QUESTION)
    assert choice["finish_reason"] == "stop" and choice["token_ids"][-1] == IM_END, choice
    text = choice["message"]["content"]
    assert text == tokenizer.decode(choice["token_ids"], skip_special_tokens=True)
    assert "<|im_end|>" not in text and "32" in text  # "17 + 25 = 32"; the digits are not our concern


async def test_temperature_one_samples_with_raw_logprobs(
    http: httpx.AsyncClient, tokenizer: PreTrainedTokenizerBase, reference: PreTrainedModel
) -> None:
    body = await _chat(
        http, messages=QUESTION, max_tokens=12, temperature=1.0, seed=3, n=2, logprobs=True, top_logprobs=1
    )
    assert body["prompt_token_ids"] == _chat_ids(tokenizer, QUESTION)
    off_greedy = 0
    for choice in body["choices"]:
        ids = choice["token_ids"]
        assert choice["message"]["content"] == tokenizer.decode(ids, skip_special_tokens=True)
        entries = choice["logprobs"]["content"]
        served = [entry["logprob"] for entry in entries]
        recomputed = _logprobs(reference, body["prompt_token_ids"], ids)
        assert max(abs(a - b) for a, b in zip(served, recomputed, strict=True)) < 1e-3
        off_greedy += sum(entry["logprob"] < entry["top_logprobs"][0]["logprob"] - 1e-6 for entry in entries)
    assert off_greedy > 0, "temperature 1.0 picked the most likely token every time"


async def test_a_tools_request_gets_the_tools_section_in_its_prompt(
    http: httpx.AsyncClient, tokenizer: PreTrainedTokenizerBase
) -> None:
    messages = [SYSTEM, ASK]
    body = await _chat(http, messages=messages, tools=TOOLS, max_tokens=2, temperature=0)
    prompt = tokenizer.decode(body["prompt_token_ids"])
    assert prompt.startswith(
        "<|im_start|>system\n" + SYSTEM["content"] + "\n\n" + TOOLS_TEXT + "<|im_end|>\n"
    )
    assert body["prompt_token_ids"] == _chat_ids(tokenizer, hermes_conversation(messages, TOOLS))


@pytest.mark.parametrize("content", ["", "Let me add them."])
async def test_a_tool_call_and_its_result_continue_the_first_calls_ids(
    http: httpx.AsyncClient, tokenizer: PreTrainedTokenizerBase, content: str
) -> None:
    """Prefix continuity: call 2's prompt = call 1's prompt + the ids the model generated + the result."""
    first = await _chat(http, messages=[SYSTEM, ASK], tools=TOOLS, max_tokens=1, temperature=0)
    # The model's answer, constructed: the canonical rendering of one call, then <|im_end|>.
    text = (content + "\n" if content else "") + tool_call_block({"function": CALL})
    generated = tokenizer.encode(text, add_special_tokens=False) + [IM_END]
    parsed_content, calls = parse_tool_calls(tokenizer.decode(generated, skip_special_tokens=True))
    assert parsed_content == (content or None) and len(calls) == 1
    history = [
        SYSTEM,
        ASK,
        {"role": "assistant", "content": parsed_content, "tool_calls": calls},
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "42"},
    ]
    second = await _chat(http, messages=history, tools=TOOLS, max_tokens=1, temperature=0)
    prefix = first["prompt_token_ids"] + generated
    assert second["prompt_token_ids"][: len(prefix)] == prefix
    rest = tokenizer.decode(second["prompt_token_ids"][len(prefix) :])
    assert (
        rest == "\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
