"""Tiny Qwen2-style causal LMs with locally trained tokenizers, built deterministically from a seed."""

from lightningrl.demos.tinylm.builder import (
    build_model,
    build_tiny_model,
    build_tokenizer,
    load_spec,
    save_tiny_model,
)
from lightningrl.demos.tinylm.corpus import base_corpus, training_lines
from lightningrl.demos.tinylm.spec import TinyModelSpec, TokenizerKind
from lightningrl.demos.tinylm.tokenizer import (
    CHAT_TEMPLATE,
    IM_END,
    IM_START,
    PAD_TOKEN,
    train_tokenizer,
)

__all__ = [
    "CHAT_TEMPLATE",
    "IM_END",
    "IM_START",
    "PAD_TOKEN",
    "TinyModelSpec",
    "TokenizerKind",
    "base_corpus",
    "build_model",
    "build_tiny_model",
    "build_tokenizer",
    "load_spec",
    "save_tiny_model",
    "train_tokenizer",
    "training_lines",
]
