"""Writing a policy's full weights as a Hugging Face model directory next to its tokenizer files."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from lightningrl.models.adapter import copy_tokenizer_files
from lightningrl.quiet import quiet_third_party


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
    copy_tokenizer_files(source_dir, out_dir)
    return out_dir


def adapter_state(engine: Any) -> tuple[dict[str, torch.Tensor], Any]:
    """The LoRA adapter's full tensors (PEFT names) and its PEFT config; every rank must call it.

    Read from the PEFT model itself: verl's `get_per_tensor_param` returns the base weights under LoRA
    unless it merges, and a merged model is not an adapter.
    """
    from peft.utils.save_and_load import get_peft_model_state_dict
    from verl.utils.device import get_device_id

    peft_model = getattr(engine.module, "_fsdp_wrapped_module", engine.module)
    state = get_peft_model_state_dict(peft_model)
    device = get_device_id()
    full = {
        name: (tensor.to(device).full_tensor() if hasattr(tensor, "full_tensor") else tensor)
        .detach()
        .to("cpu", copy=True)
        for name, tensor in state.items()
    }
    return full, peft_model.peft_config["default"]


def write_policy(engine: Any, source_dir: Path, base_dir: Path, out_dir: Path) -> Path:
    """Save a verl engine's policy to `out_dir` from every rank (gathering is collective; rank 0 writes).

    Full fine-tuning: a Hugging Face model directory. LoRA: the adapter directory pointing at
    `base_dir` (see `lightningrl.models.adapter`).
    """
    import torch.distributed as dist

    from lightningrl.models.adapter import save_adapter

    writer = not dist.is_initialized() or dist.get_rank() == 0
    if engine.model_config.lora_rank > 0:
        state, peft_config = adapter_state(engine)
        if writer:
            save_adapter(state, peft_config, base_dir, out_dir)
    else:
        params, _ = engine.get_per_tensor_param()
        full = {name: tensor.detach().to("cpu", copy=True) for name, tensor in params}
        if writer:
            save_hf_model(full.items(), source_dir, out_dir)
    if dist.is_initialized():
        dist.barrier()
    return out_dir
