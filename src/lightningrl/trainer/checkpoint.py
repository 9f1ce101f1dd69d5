"""Writing a policy's full weights as a Hugging Face model directory next to its tokenizer files."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

import torch

from lightningrl.quiet import quiet_third_party

# Written by save_pretrained from the weights, or weights themselves: never copied from the source.
_MODEL_FILES = ("config.json", "generation_config.json")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".msgpack", ".h5")


def save_hf_model(params: Iterable[tuple[str, torch.Tensor]], source_dir: Path, out_dir: Path) -> Path:
    """Load `params` (full tensors, HF names) into the source's architecture and save it to `out_dir`.

    Every other file of the source directory (tokenizer, chat template, ...) is copied unchanged.
    """
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(source_dir)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    state = {name: tensor.detach().to("cpu") for name, tensor in params}
    model.load_state_dict(state, strict=True, assign=True)
    model.tie_weights()
    out_dir.mkdir(parents=True, exist_ok=True)
    with quiet_third_party():  # no "Writing model shards" bar every step
        model.save_pretrained(out_dir)
    for path in source_dir.iterdir():
        if path.is_file() and path.name not in _MODEL_FILES and not path.name.endswith(_WEIGHT_SUFFIXES):
            if not path.name.endswith(".index.json"):
                shutil.copy2(path, out_dir / path.name)
    return out_dir
