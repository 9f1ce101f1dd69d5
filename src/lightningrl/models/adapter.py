"""A LoRA version's artifact: a PEFT adapter directory that points at the base checkpoint it applies to.

The directory holds exactly what PEFT's `save_pretrained` writes (`adapter_config.json`,
`adapter_model.safetensors`) plus the base's tokenizer files. The pointer to the base is PEFT's own
field, `base_model_name_or_path` in `adapter_config.json`: an absolute path to a full Hugging Face
checkpoint directory (never another adapter). Every version of one LoRA run points at the same base.
Anything that loads a checkpoint (inference server, trainer, reference policy) goes through here, so
a full checkpoint and an adapter are interchangeable wherever a `checkpoint` path is taken.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from lightningrl.quiet import quiet_third_party

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


def is_adapter_dir(path: str | Path) -> bool:
    """True when `path` is a PEFT adapter directory (it has `adapter_config.json`)."""
    return (Path(path) / ADAPTER_CONFIG).is_file()


def base_of(path: str | Path) -> Path:
    """The full checkpoint an adapter applies to; `path` itself when it is a full checkpoint."""
    path = Path(path)
    if not is_adapter_dir(path):
        return path
    config = json.loads((path / ADAPTER_CONFIG).read_text())
    base = config.get("base_model_name_or_path")
    if not base or not (Path(base) / "config.json").is_file():
        raise FileNotFoundError(
            f"adapter {str(path)!r}: base_model_name_or_path {base!r} is not a Hugging Face checkpoint "
            "directory (no config.json)"
        )
    return Path(base)


def model_config(path: str | Path) -> dict[str, Any]:
    """The Hugging Face `config.json` of a checkpoint, or of the base of an adapter."""
    return json.loads((base_of(path) / "config.json").read_text())


def load_causal_lm(path: str | Path, *, dtype: Any = "auto", merge: bool = True) -> Any:
    """A causal LM from a full checkpoint or from an adapter applied to its base (merged by default:
    the result is a plain model, as fast as the base)."""
    from transformers import AutoModelForCausalLM

    with quiet_third_party():
        model = AutoModelForCausalLM.from_pretrained(base_of(path), dtype=dtype)
        if not is_adapter_dir(path):
            return model
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(path))
    return model.merge_and_unload() if merge else model


def save_adapter(state: dict[str, torch.Tensor], peft_config: Any, base_dir: Path, out_dir: Path) -> Path:
    """Write an adapter as PEFT's `save_pretrained` does, pointing at `base_dir`, with its tokenizer files.

    `state` is `get_peft_model_state_dict`'s output (names without the adapter name), full tensors.
    """
    import copy

    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    config = copy.deepcopy(peft_config)
    config.base_model_name_or_path = str(Path(base_dir).resolve())
    config.inference_mode = True
    config.save_pretrained(str(out_dir))
    tensors = {name: tensor.detach().to("cpu").contiguous() for name, tensor in state.items()}
    save_file(tensors, str(out_dir / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    copy_tokenizer_files(base_dir, out_dir)
    return out_dir


# Written from the weights by save_pretrained, or weights themselves: never copied from a source.
_MODEL_FILES = ("config.json", "generation_config.json", ADAPTER_CONFIG)
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".msgpack", ".h5", ".index.json")


def copy_tokenizer_files(source_dir: Path, out_dir: Path) -> None:
    """Copy every file of `source_dir` that is not a model config or weights (tokenizer, chat template)."""
    import shutil

    for path in Path(source_dir).iterdir():
        if path.is_file() and path.name not in _MODEL_FILES and not path.name.endswith(_WEIGHT_SUFFIXES):
            shutil.copy2(path, out_dir / path.name)
