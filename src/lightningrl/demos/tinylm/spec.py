"""TinyModelSpec: everything that determines a tiny model's weights and vocabulary."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

TokenizerKind = Literal["bpe", "word"]


class TinyModelSpec(BaseModel):
    """The inputs of `build_tiny_model`; the same spec always builds the same model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = 0
    tokenizer_kind: TokenizerKind = "bpe"
    extra_text: tuple[str, ...] = ()
    vocab_size: int = Field(default=1024, ge=300, le=65536, description="BPE target size; 'word' ignores it.")
    hidden_size: int = Field(default=128, ge=8, le=1024)
    num_layers: int = Field(default=2, ge=1, le=24)
    num_heads: int = Field(default=4, ge=1, le=64)
    num_kv_heads: int | None = Field(default=None, ge=1, le=64)
    intermediate_size: int | None = Field(default=None, ge=8, le=8192)
    max_position_embeddings: int = Field(default=1024, ge=32, le=32768)
    rope_theta: float = Field(default=10000.0, gt=0)
    tie_word_embeddings: bool = True

    @model_validator(mode="after")
    def _check_heads(self) -> TinyModelSpec:
        """Reject head counts that do not divide the hidden size or each other."""
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size={self.hidden_size} is not divisible by num_heads={self.num_heads}")
        if (self.hidden_size // self.num_heads) % 2:
            raise ValueError(
                f"head size {self.hidden_size // self.num_heads} must be even for rotary embeddings"
            )
        if self.num_heads % self.kv_heads:
            raise ValueError(f"num_heads={self.num_heads} is not divisible by num_kv_heads={self.kv_heads}")
        return self

    @property
    def kv_heads(self) -> int:
        """Key/value heads (defaults to `num_heads`: plain multi-head attention)."""
        return self.num_kv_heads or self.num_heads

    @property
    def mlp_size(self) -> int:
        """MLP width (defaults to 4 x hidden size)."""
        return self.intermediate_size or 4 * self.hidden_size
