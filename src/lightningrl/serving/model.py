"""LoadedModel: one checkpoint's weights and tokenizer on a device, swapped whole on reload."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import torch
from transformers import AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from lightningrl.models.adapter import load_causal_lm
from lightningrl.quiet import quiet_third_party
from lightningrl.serving.packed_linear import pack_linears, packing_available
from lightningrl.serving.tool_prompt import renders_tools


def resolve_device(device: str | None) -> str:
    """`device`, or CUDA when available and CPU otherwise."""
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available")
    return device


@dataclass(frozen=True)
class LoadedModel:
    """An immutable (model, tokenizer) pair; a batch keeps the one it started with."""

    checkpoint: Path
    version: int
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    device: str

    # The properties below are read per token or per step, so each is computed once.

    @cached_property
    def vocab_size(self) -> int:
        """Rows of the output layer: valid token ids are below this."""
        return int(self.model.get_output_embeddings().weight.shape[0])

    @cached_property
    def max_model_len(self) -> int:
        """Longest prompt plus completion the model accepts."""
        return int(getattr(self.model.config, "max_position_embeddings", 2048))

    @cached_property
    def eos_ids(self) -> frozenset[int]:
        """Token ids that end a choice: the tokenizer's EOS and the generation config's."""
        ids: set[int] = set()
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        configured = getattr(self.model.generation_config, "eos_token_id", None)
        if isinstance(configured, int):
            ids.add(configured)
        elif configured:
            ids.update(int(i) for i in configured)
        return frozenset(ids)

    @cached_property
    def pad_id(self) -> int:
        """Token id used for left padding (never attended to)."""
        for candidate in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id):
            if candidate is not None:
                return int(candidate)
        return 0

    @cached_property
    def template_renders_tools(self) -> bool:
        """Whether the chat template writes `tools` itself (else the server renders them, `tool_prompt`)."""
        return renders_tools(self.tokenizer)

    def decode(self, token_ids: list[int]) -> str:
        """The text of `token_ids`, special tokens skipped (the text every response returns)."""
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)


def load_model(checkpoint: str | Path, *, device: str, version: int, packed: bool = True) -> LoadedModel:
    """Load a Hugging Face causal LM directory (or a LoRA adapter directory) onto `device` in its saved
    dtype; `packed`: its large linear layers packed for oneDNN where that is available (`packed_linear`)."""
    path = Path(checkpoint)
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint directory does not exist: {str(path)!r}")
    with quiet_third_party():  # no "Loading weights" bar on every reload
        tokenizer = AutoTokenizer.from_pretrained(path)
        # A LoRA adapter directory (lightningrl.models.adapter) loads as its base with the adapter merged in.
        model = load_causal_lm(path, dtype="auto").to(device).eval()
    if packed and packing_available(model, device):
        pack_linears(model)
    return LoadedModel(checkpoint=path, version=version, model=model, tokenizer=tokenizer, device=device)
