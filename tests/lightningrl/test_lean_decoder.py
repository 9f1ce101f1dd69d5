"""LeanDecoder: the engine's own decode step gives the same logits and cache as transformers' forward."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.serving.kv_cache import GrowingCache
from lightningrl.serving.lean import lean_decoder


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen2 model with grouped-query attention (two query heads per key/value head)."""
    return build_tiny_model(tmp_path_factory.mktemp("lean") / "m", seed=3, num_kv_heads=2)


@pytest.mark.parametrize("padded", [False, True])
def test_a_lean_step_is_bit_identical_to_the_model_forward(model_dir: Path, padded: bool) -> None:
    """Prefill a batch, then one decode step each way: equal logits and equal cached keys and values
    (an unpadded prefill is compared too)."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa").eval()
    lean = lean_decoder(model)
    assert lean is not None
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(4, 200, (4, 7), generator=generator)
    mask = torch.ones(4, 8, dtype=torch.long)
    if padded:
        mask[1, :3] = 0  # row 1's first three columns are padding
    positions = (mask[:, :-1].cumsum(-1) - 1).clamp(min=0)
    with torch.inference_mode():
        caches = GrowingCache(), GrowingCache()
        prefilled = [
            model(
                input_ids=prompt,
                attention_mask=mask[:, :-1] if padded else None,
                position_ids=positions,
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,  # as the engine asks
            ).logits[:, -1]
            for cache in caches
        ]
        if not padded:  # the engine prefills unpadded prompts the lean way too
            caches = caches[0], GrowingCache()
            assert torch.equal(lean(prompt, positions, None, caches[1]), prefilled[0])
        token, position = torch.tensor([[5], [6], [7], [8]]), positions[:, -1:] + 1
        expected = model(
            input_ids=token,
            attention_mask=mask if padded else None,
            position_ids=position,
            past_key_values=caches[0],
            use_cache=True,
            logits_to_keep=1,
        ).logits[:, -1]
        got = lean(token, position, mask.bool()[:, None, None, :] if padded else None, caches[1])
    assert torch.equal(got, expected)
    for ours, theirs in zip(caches[1].layers, caches[0].layers, strict=True):
        assert torch.equal(ours.keys, theirs.keys) and torch.equal(ours.values, theirs.values)


def test_other_attention_implementations_decode_through_transformers(model_dir: Path) -> None:
    """Only SDPA attention takes the lean path (eager attention would need an additive mask)."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager")
    assert lean_decoder(model) is None


def test_only_large_weights_are_packed(model_dir: Path) -> None:
    """A packed call's fixed cost loses on small matmuls: the tiny model's layers (the largest 87k
    elements) stay plain by default; a layer of at least `PACK_MIN_ELEMENTS` is packed."""
    from lightningrl.serving.model import load_model
    from lightningrl.serving.packed_linear import PACK_MIN_ELEMENTS, PackedLinear, pack_linears

    tiny = load_model(model_dir, device="cpu", version=0).model
    assert not any(isinstance(m, PackedLinear) for m in tiny.modules())
    head = torch.nn.Sequential(torch.nn.Linear(256, PACK_MIN_ELEMENTS // 256), torch.nn.Linear(256, 256))
    assert pack_linears(head) == 1
    assert isinstance(head[0], PackedLinear) and type(head[1]) is torch.nn.Linear


def test_packed_layers_decode_as_the_plain_model_does(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Packed for oneDNN (here every layer, whatever its size), each linear layer of the served model is
    a PackedLinear; transformers' forward and the lean step still agree bit for bit, and both stay within
    float noise of the unpacked model (same greedy tokens, log-probs within 1e-4)."""
    from lightningrl.serving import packed_linear
    from lightningrl.serving.model import load_model
    from lightningrl.serving.packed_linear import PackedLinear

    monkeypatch.setattr(packed_linear, "PACK_MIN_ELEMENTS", 0)
    plain = load_model(model_dir, device="cpu", version=0, packed=False).model
    packed = load_model(model_dir, device="cpu", version=0).model
    assert not any(isinstance(m, PackedLinear) for m in plain.modules())
    linears = [m for m in packed.modules() if isinstance(m, torch.nn.Linear | PackedLinear)]
    assert linears and all(isinstance(m, PackedLinear) for m in linears)
    lean = lean_decoder(packed)
    assert lean is not None
    prompt = torch.randint(4, 200, (3, 9), generator=torch.Generator().manual_seed(1))
    positions = torch.arange(9).expand(3, -1)
    with torch.inference_mode():
        expected = torch.log_softmax(plain(input_ids=prompt).logits[:, -1], -1)
        forward = torch.log_softmax(packed(input_ids=prompt, logits_to_keep=1).logits[:, -1], -1)
        stepped = torch.log_softmax(lean(prompt, positions, None, GrowingCache()), -1)
    assert torch.equal(forward, stepped)
    assert not torch.equal(forward, expected)  # another kernel: it is not the plain path in disguise
    assert (forward - expected).abs().max() < 1e-4
    assert torch.equal(forward.argmax(-1), expected.argmax(-1))


def test_the_server_packs_unless_told_not_to_and_a_reload_keeps_the_choice(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`InferenceService(packed_weights=...)` (serve-model --no-packed-weights) decides for every model
    it loads, the reloaded ones too (every layer counts as large here)."""
    from lightningrl.serving import packed_linear
    from lightningrl.serving.packed_linear import PackedLinear
    from lightningrl.serving.service import InferenceService

    monkeypatch.setattr(packed_linear, "PACK_MIN_ELEMENTS", 0)

    def packed(service: InferenceService) -> bool:
        return any(isinstance(m, PackedLinear) for m in service.model.model.modules())

    on, off = (
        InferenceService(model_dir, device="cpu"),
        InferenceService(model_dir, device="cpu", packed_weights=False),
    )
    assert packed(on) and not packed(off)
    on.reload(), off.reload()
    assert on.model.version == off.model.version == 1
    assert packed(on) and not packed(off)
