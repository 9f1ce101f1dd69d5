"""build_tiny_model: a seeded Qwen2-style causal LM and its tokenizer, saved as a Hugging Face directory."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from lightningrl.demos.tinylm.corpus import training_lines
from lightningrl.demos.tinylm.spec import TinyModelSpec, TokenizerKind
from lightningrl.demos.tinylm.tokenizer import IM_END, PAD_TOKEN, train_tokenizer
from lightningrl.quiet import quiet_third_party

SPEC_FILE = "tinylm_spec.json"


def build_tokenizer(spec: TinyModelSpec) -> PreTrainedTokenizerFast:
    """The tokenizer `spec` describes, trained on the built-in corpus plus `spec.extra_text`."""
    return train_tokenizer(
        spec.tokenizer_kind,
        training_lines(spec.extra_text),
        vocab_size=spec.vocab_size,
        model_max_length=spec.max_position_embeddings,
    )


def model_config(spec: TinyModelSpec, tokenizer: PreTrainedTokenizerFast) -> Qwen2Config:
    """The Qwen2 configuration for `spec`, sized to `tokenizer`'s vocabulary."""
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.mlp_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.kv_heads,
        max_position_embeddings=spec.max_position_embeddings,
        rope_theta=spec.rope_theta,
        tie_word_embeddings=spec.tie_word_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
    )


def build_model(spec: TinyModelSpec, tokenizer: PreTrainedTokenizerFast) -> Qwen2ForCausalLM:
    """A freshly initialized model whose weights depend only on `spec` (seeded, CPU, float32)."""
    config = model_config(spec, tokenizer)
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(spec.seed)
        model = Qwen2ForCausalLM(config).to(torch.float32)
    finally:
        torch.random.set_rng_state(generator_state)
    model.generation_config.pad_token_id = config.pad_token_id
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.bos_token_id = None
    return model.eval()


def build_tiny_model(
    out_dir: str | Path,
    *,
    seed: int = 0,
    tokenizer_kind: TokenizerKind = "bpe",
    extra_text: Iterable[str] = (),
    hidden_size: int = 128,
    num_layers: int = 2,
    num_heads: int = 4,
    **spec_fields: Any,
) -> Path:
    """Build a tiny model and tokenizer from a seed and save both to `out_dir`; returns the directory.

    Extra keyword arguments are `TinyModelSpec` fields (vocab_size, intermediate_size, num_kv_heads, ...).
    """
    spec = TinyModelSpec(
        seed=seed,
        tokenizer_kind=tokenizer_kind,
        extra_text=tuple(extra_text),
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        **spec_fields,
    )
    return save_tiny_model(spec, out_dir)


def save_tiny_model(spec: TinyModelSpec, out_dir: str | Path) -> Path:
    """Build the model `spec` describes and save it (weights, config, tokenizer, spec) to `out_dir`."""
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(spec)
    model = build_model(spec, tokenizer)
    with quiet_third_party():
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
    (path / SPEC_FILE).write_text(json.dumps(spec.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
    return path


def load_spec(model_dir: str | Path) -> TinyModelSpec:
    """The spec a tiny model directory was built from."""
    return TinyModelSpec.model_validate_json((Path(model_dir) / SPEC_FILE).read_text())
