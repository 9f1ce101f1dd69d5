"""Tiny models: built from a seed, saved as a normal Hugging Face directory, reloaded by the Auto classes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast, Qwen2ForCausalLM

from lightningrl.demos.tinylm import (
    IM_END,
    IM_START,
    PAD_TOKEN,
    TinyModelSpec,
    build_tiny_model,
    training_lines,
)
from lightningrl.demos.tinylm.tokenizer import word_pieces

EXTRA = ("Move the knight to square 12.", "Zebras graze quietly")
SMALL = {"hidden_size": 32, "num_layers": 1, "num_heads": 2}


@pytest.fixture(scope="module", params=["bpe", "word"])
def model_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model of each tokenizer kind, with extra task text."""
    out = tmp_path_factory.mktemp(f"tiny-{request.param}")
    return build_tiny_model(out, seed=0, tokenizer_kind=request.param, extra_text=EXTRA, **SMALL)


def _state(model_dir: Path) -> dict[str, torch.Tensor]:
    """The saved weights."""
    return AutoModelForCausalLM.from_pretrained(model_dir).state_dict()


def _pieces(tokenizer: PreTrainedTokenizerFast, text: str) -> list[str]:
    """The text of each token `text` encodes to."""
    return [tokenizer.decode([token]) for token in tokenizer.encode(text, add_special_tokens=False)]


def test_directory_reloads_with_auto_classes(model_dir: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert isinstance(model, Qwen2ForCausalLM)
    assert isinstance(tokenizer, PreTrainedTokenizerFast)
    assert model.config.vocab_size == len(tokenizer)
    assert model.config.hidden_size == 32 and model.config.num_hidden_layers == 1
    assert tokenizer.eos_token == IM_END and tokenizer.pad_token == PAD_TOKEN
    assert model.config.eos_token_id == tokenizer.eos_token_id
    assert IM_START in tokenizer.all_special_tokens


def test_chat_template_is_chatml(model_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 3?"}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    assert ids == tokenizer.encode(text, add_special_tokens=False)
    assert ids[-3:-1] == [
        tokenizer.convert_tokens_to_ids(IM_START),
        tokenizer.convert_tokens_to_ids("assistant"),
    ]


def test_text_round_trips_and_digits_are_single_tokens(model_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    for text in [*EXTRA, "Ünïcode text 😀 and 12345!", "  spaced\n\nlines\t"]:
        assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text
    assert tokenizer.tokenize("12345") == ["1", "2", "3", "4", "5"]


def test_same_seed_same_model_other_seed_other_weights(model_dir: Path, tmp_path: Path) -> None:
    kind = AutoTokenizer.from_pretrained(model_dir)
    spec = TinyModelSpec.model_validate_json((model_dir / "tinylm_spec.json").read_text())
    again = build_tiny_model(
        tmp_path / "again", seed=0, tokenizer_kind=spec.tokenizer_kind, extra_text=EXTRA, **SMALL
    )
    other = build_tiny_model(
        tmp_path / "other", seed=1, tokenizer_kind=spec.tokenizer_kind, extra_text=EXTRA, **SMALL
    )
    assert (again / "tokenizer.json").read_bytes() == (model_dir / "tokenizer.json").read_bytes()
    assert (again / "model.safetensors").read_bytes() == (model_dir / "model.safetensors").read_bytes()
    assert AutoTokenizer.from_pretrained(other).get_vocab() == kind.get_vocab()
    original, changed = _state(model_dir), _state(other)
    assert any(not torch.equal(original[name], changed[name]) for name in original)


def test_word_kind_makes_every_corpus_word_one_token(tmp_path: Path) -> None:
    model_dir = build_tiny_model(tmp_path, tokenizer_kind="word", extra_text=EXTRA, **SMALL)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    for piece in word_pieces(training_lines(EXTRA)):
        assert len(tokenizer.encode(piece, add_special_tokens=False)) == 1, piece
    assert _pieces(tokenizer, "Zebras graze quietly") == ["Zebras", " graze", " quietly"]
    assert _pieces(tokenizer, " knight 12") == [" knight", " ", "1", "2"]
    # Unseen words fall back to smaller pieces: there is no unknown token.
    assert tokenizer.decode(tokenizer.encode("Xylophonist", add_special_tokens=False)) == "Xylophonist"


def test_extra_text_grows_the_bpe_vocabulary(tmp_path: Path) -> None:
    plain = AutoTokenizer.from_pretrained(build_tiny_model(tmp_path / "plain", **SMALL))
    task = ["quokka " * 20]
    extended = AutoTokenizer.from_pretrained(build_tiny_model(tmp_path / "task", extra_text=task, **SMALL))
    assert len(extended.tokenize(" quokka")) < len(plain.tokenize(" quokka"))


def test_sizes_are_configurable(tmp_path: Path) -> None:
    model_dir = build_tiny_model(tmp_path, hidden_size=256, num_layers=4, num_heads=8, num_kv_heads=2)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    parameters = sum(p.numel() for p in model.parameters())
    assert 1_000_000 < parameters < 15_000_000
    assert model.config.num_key_value_heads == 2


def test_spec_rejects_inconsistent_heads() -> None:
    with pytest.raises(ValueError, match="num_heads"):
        TinyModelSpec(hidden_size=64, num_heads=3)
    with pytest.raises(ValueError, match="num_kv_heads"):
        TinyModelSpec(hidden_size=64, num_heads=4, num_kv_heads=3)


def test_the_cli_builds_a_tiny_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lightningrl.cli import main

    out = tmp_path / "cli"
    assert (
        main(["build-tiny-model", str(out), "--seed", "3", "--tokenizer", "word", "--hidden-size", "32"]) == 0
    )
    assert capsys.readouterr().out.strip() == str(out)
    spec = TinyModelSpec.model_validate_json((out / "tinylm_spec.json").read_text())
    assert (spec.seed, spec.tokenizer_kind, spec.hidden_size, spec.tie_word_embeddings) == (
        3,
        "word",
        32,
        True,
    )
