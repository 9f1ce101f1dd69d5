"""vLLM-CPU on the real SmolLM2-135M-Instruct (tied embeddings, a ChatML template without a tool
section), one server for the module (`serve-model --engine vllm --enforce-eager --lora-rank 8`):
exact ids, stop at `<|im_end|>`, temperature 1.0, tools rendered as our server renders them, a
`<tool_call>` parsed, and weight sync of the tied model (full weights) and of a LoRA adapter, each
checked against a transformers fp32 forward of the new weights. The tests run in file order: the
weight syncs come last."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from engine_stack import TOOLS, VllmProcess, serve, start_vllm
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from lightningrl.models import cached_model
from lightningrl.serving import create_app
from lightningrl.serving.endpoint import sync_weights
from lightningrl.serving.tool_prompt import tool_call_block
from lightningrl.trainer.checkpoint import save_hf_model

pytestmark = pytest.mark.slow

IM_END = 2
RANK = 8
TOLERANCE = 1e-4
"""vLLM-CPU fp32 (oneDNN GEMMs) against transformers fp32 on a 30-layer model (measured: ~5e-5)."""
QUESTION = [{"role": "user", "content": "What is 17 plus 25? Answer with just the number."}]
SYSTEM = {"role": "system", "content": "You add numbers with the tools you are given."}
ASK = {"role": "user", "content": "Add 17 and 25."}
CALL = {"name": "add", "arguments": {"a": 17, "b": 25}}


class Checkpoints:
    """`base`: SmolLM2 served from a directory of its own (links to the cached files). `perturbed`:
    base with noise on the tied embedding, written as the trainer writes a step (`save_hf_model`).
    `adapters`: two random LoRA adapters on base, saved by PEFT."""

    def __init__(self, root: Path) -> None:
        source = cached_model("smollm2")
        self.base = root / "base"
        self.base.mkdir()
        for file in source.iterdir():
            (self.base / file.name).symlink_to(file)
        self.perturbed = root / "perturbed"
        self.adapters = [root / "adapter-1", root / "adapter-2"]
        self.tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(self.base)

    def build(self) -> None:
        model = load(self.base)
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            embedding = model.get_input_embeddings().weight
            embedding.add_(torch.randn(embedding.shape, generator=generator) * 0.02)
        assert model.get_output_embeddings().weight.data_ptr() == embedding.data_ptr()  # tied
        save_hf_model(model.state_dict().items(), self.base, self.perturbed)
        for seed, out in enumerate(self.adapters, start=1):
            torch.manual_seed(seed)
            config = LoraConfig(
                r=RANK,
                lora_alpha=16,
                target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                init_lora_weights=False,
            )
            get_peft_model(load(self.base), config).save_pretrained(out)


def load(path: Path) -> PreTrainedModel:
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


@torch.inference_mode()
def reference_logprobs(model: PreTrainedModel, ids: list[int]) -> list[float]:
    """log p(ids[i] | ids[:i]) for i >= 1, by a plain fp32 forward."""
    logits = model(torch.tensor([ids])).logits[0].float()
    steps = torch.log_softmax(logits[:-1], dim=-1)
    return steps.gather(1, torch.tensor(ids[1:])[:, None]).squeeze(1).tolist()


def gap(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Checkpoints:
    torch.set_num_threads(1)
    return Checkpoints(tmp_path_factory.mktemp("smollm2-vllm"))


@pytest.fixture(scope="module")
def vllm(checkpoints: Checkpoints, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmProcess]:
    """vLLM on base (LoRA enabled: adapter requests and base requests are never sent together here);
    the perturbed checkpoint and the adapters are written while it starts."""
    process = start_vllm(
        checkpoints.base,
        tmp_path_factory.mktemp("smollm2-vllm-logs"),
        *("--lora-rank", str(RANK)),
        meanwhile=checkpoints.build,
    )
    print(f"vLLM on SmolLM2 ready {process.startup_s:.1f} s after launch (log {process.log})")
    yield process
    process.stop()


async def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=120) as client:
        response = await client.post(url, json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def served_logprobs(vllm: VllmProcess, ids: list[int], model: str = "policy") -> list[float]:
    """vLLM's prompt logprobs of `ids` (the same quantity as `reference_logprobs`)."""
    body = {"model": model, "prompt": ids, "max_tokens": 1, "prompt_logprobs": 0, "temperature": 0}
    entries = (await post(f"{vllm.url}/completions", body))["choices"][0]["prompt_logprobs"]
    return [entries[i][str(token)]["logprob"] for i, token in enumerate(ids) if i > 0]


def scored_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """A fixed prompt and completion: the chat prompt of QUESTION, an answer, `<|im_end|>`."""
    prompt = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, return_dict=False)
    return prompt + tokenizer.encode("17 plus 25 is 42.", add_special_tokens=False) + [IM_END]


async def test_exact_ids_stop_at_im_end_and_raw_logprobs_at_temperature_one(
    vllm: VllmProcess, checkpoints: Checkpoints
) -> None:
    tokenizer = checkpoints.tokenizer
    reference = load(checkpoints.base)
    prompt_ids = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, return_dict=False)
    body = {
        "model": "policy",
        "messages": QUESTION,
        "max_tokens": 40,
        "temperature": 1.0,
        "seed": 3,
        "n": 4,
        "logprobs": True,
        "top_logprobs": 2,  # vLLM lists the sampled token first, then the most likely ones
        "return_token_ids": True,
    }
    answer = await post(f"{vllm.url}/chat/completions", body)
    assert answer["prompt_token_ids"] == prompt_ids
    stopped = off_greedy = 0
    gaps = []
    for choice in answer["choices"]:
        ids = choice["token_ids"]
        assert tokenizer.decode(ids, skip_special_tokens=True) == choice["message"]["content"]
        if choice["finish_reason"] == "stop":
            assert ids[-1] == IM_END and IM_END not in ids[:-1]
            stopped += 1
        entries = choice["logprobs"]["content"]
        served = [entry["logprob"] for entry in entries]
        gaps.append(gap(served, reference_logprobs(reference, prompt_ids + ids)[len(prompt_ids) - 1 :]))
        off_greedy += sum(e["logprob"] < max(t["logprob"] for t in e["top_logprobs"]) - 1e-6 for e in entries)
    print(f"SmolLM2 on vLLM, temperature 1: {stopped}/4 stopped at <|im_end|>, max |dlogp| {max(gaps):.1e}")
    assert stopped > 0, "no sample stopped at <|im_end|> within 40 tokens"
    assert off_greedy > 0, "temperature 1.0 picked the most likely token every time"
    assert max(gaps) < TOLERANCE


async def test_tools_render_as_on_our_server_and_a_tool_call_parses(
    vllm: VllmProcess, checkpoints: Checkpoints
) -> None:
    """The same tools requests on both engines get the same prompt ids (vLLM through the chat
    template our launcher gives it, ours through `hermes_conversation`)."""
    tool_history = [
        SYSTEM,
        ASK,
        {
            "role": "assistant",
            "content": "Adding.",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {**CALL, "arguments": json.dumps(CALL["arguments"])},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "42"},
        {"role": "tool", "tool_call_id": "b", "content": "3"},
    ]
    requests = [[SYSTEM, ASK], [ASK], tool_history]
    ours = serve(create_app(checkpoints.base, device="cpu", cpu_threads=1), "smollm2-ours")
    try:
        for messages in requests:
            body = {"messages": messages, "tools": TOOLS, "max_tokens": 1, "temperature": 0}
            theirs = await post(
                f"{vllm.url}/chat/completions", {**body, "model": "policy", "return_token_ids": True}
            )
            mine = await post(f"{ours.url}/v1/chat/completions", {**body, "return_token_ids": True})
            assert theirs["prompt_token_ids"] == mine["prompt_token_ids"], messages
    finally:
        ours.stop()

    # SmolLM2 never writes a <tool_call> by itself (docs/serving.md); constrained to the canonical
    # block, the text vLLM's hermes parser gets is the model's, and it parses into tool_calls.
    text = tool_call_block({"function": CALL})
    body = {
        "model": "policy",
        "messages": [SYSTEM, ASK],
        "tools": TOOLS,
        "max_tokens": 64,
        "temperature": 0,
        "return_token_ids": True,
        "structured_outputs": {"choice": [text]},
    }
    answer = await post(f"{vllm.url}/chat/completions", body)
    choice = answer["choices"][0]
    assert checkpoints.tokenizer.decode(choice["token_ids"], skip_special_tokens=True) == text
    assert choice["finish_reason"] == "tool_calls", choice
    (call,) = choice["message"]["tool_calls"]
    assert (
        call["function"]["name"] == "add" and json.loads(call["function"]["arguments"]) == CALL["arguments"]
    )


async def test_weight_sync_of_the_tied_model_serves_the_new_weights(
    vllm: VllmProcess, checkpoints: Checkpoints
) -> None:
    ids = scored_ids(checkpoints.tokenizer)
    old, new = (
        reference_logprobs(load(checkpoints.base), ids),
        reference_logprobs(load(checkpoints.perturbed), ids),
    )
    assert gap(old, new) > 0.1  # the perturbation shows in the output head too
    assert gap(await served_logprobs(vllm, ids), old) < TOLERANCE

    started = time.perf_counter()
    row = await sync_weights([vllm.url], str(checkpoints.perturbed), engine="vllm")
    took = time.perf_counter() - started
    after = await served_logprobs(vllm, ids)
    print(
        f"tied sync {took:.2f} s ({row}); served vs new {gap(after, new):.1e}, vs old {gap(after, old):.2f}"
    )
    assert gap(after, new) < TOLERANCE
    assert gap(after, old) > 0.1

    await sync_weights([vllm.url], str(checkpoints.base), engine="auto")  # and back, exactly
    assert gap(await served_logprobs(vllm, ids), old) < TOLERANCE


async def test_lora_adapter_sync_on_the_real_model_matches_peft(
    vllm: VllmProcess, checkpoints: Checkpoints
) -> None:
    ids = scored_ids(checkpoints.tokenizer)
    gaps, expected = [], []
    for adapter in checkpoints.adapters:
        # The loop's sync with an adapter checkpoint: loaded in place under the LLM's model name.
        row = await sync_weights([vllm.url], str(adapter), engine="vllm", model="policy-lora")
        reference = PeftModel.from_pretrained(load(checkpoints.base), adapter).eval()
        expected.append(reference_logprobs(reference, ids))
        served = await served_logprobs(vllm, ids, model="policy-lora")
        gaps.append(gap(served, expected[-1]))
        assert gaps[-1] < TOLERANCE, (adapter, row)
    assert gap(served, expected[0]) > 1e-2  # the second adapter replaced the first
    print(f"LoRA adapter sync on SmolLM2: served vs PEFT max |dlogp| {max(gaps):.1e}; last sync {row}")
