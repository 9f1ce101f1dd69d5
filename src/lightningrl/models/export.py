"""Export a trained version as a plain Hugging Face directory that any server loads as is.

`lightningrl model export OUT --run runs/x` (or `--store URL`, `--checkpoint DIR`) and
`export_checkpoint` / `export_version` write: the weights as safetensors (a LoRA adapter merged into
its base first, so nothing outside this project has to know PEFT), `config.json`,
`generation_config.json`, the tokenizer files with the chat template the version was served with,
and `lightningrl_export.json`, a manifest naming the resource, the version, its lineage (every
version from the start checkpoint to it), the pointers at it and its release receipt if the gate
made one. The directory passes `check_checkpoint` (what `fit` and the servers check) before it is
reported written; transformers and vLLM load it and greedy-generate what the served version did
(`tests/lightningrl/test_model_export.py`).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from lightningrl.models.adapter import base_of, copy_tokenizer_files, is_adapter_dir, load_causal_lm
from lightningrl.quiet import quiet_third_party

EXPORT_MANIFEST = "lightningrl_export.json"


def export_checkpoint(
    checkpoint: str | Path, out_dir: str | Path, *, manifest: Mapping[str, Any] | None = None
) -> Path:
    """Write `checkpoint` (a full HF directory or a LoRA adapter) to `out_dir` as a full HF directory,
    weights in their stored dtype, with the manifest's fields (plus the source and whether a LoRA
    adapter was merged). `out_dir` must be new or empty: an export never overwrites one."""
    from lightningrl.models.check import check_checkpoint

    source = Path(checkpoint)
    if not (source / "config.json").is_file() and not is_adapter_dir(source):
        raise FileNotFoundError(
            f"checkpoint {str(source)!r} is neither a Hugging Face directory (config.json) nor a LoRA "
            "adapter (adapter_config.json): was it pruned (keep_checkpoints)?"
        )
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"out_dir {str(out)!r} is not empty: export into a new directory")
    adapter = is_adapter_dir(source)
    model = load_causal_lm(source, dtype="auto", merge=True)
    out.mkdir(parents=True, exist_ok=True)
    try:
        with quiet_third_party():
            model.save_pretrained(str(out), safe_serialization=True)
        copy_tokenizer_files(source, out)
        if (
            not (out / "generation_config.json").is_file()
            and (base_of(source) / "generation_config.json").is_file()
        ):
            shutil.copy2(base_of(source) / "generation_config.json", out / "generation_config.json")
        check_checkpoint(out)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    record = {
        "source_checkpoint": str(source.resolve()),
        "merged_lora_adapter": adapter,
        "base_checkpoint": str(base_of(source).resolve()) if adapter else None,
        "dtype": str(getattr(model, "dtype", "")).removeprefix("torch."),
        "exported_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **(manifest or {}),
    }
    (out / EXPORT_MANIFEST).write_text(json.dumps(record, indent=2) + "\n")
    return out


async def export_version(
    store: Any,
    out_dir: str | Path,
    *,
    resource_name: str = "llm",
    version_id: str | None = None,
    pointer: Literal["latest", "approved"] = "latest",
) -> Path:
    """Export a store's version of `resource_name` (by id, else the one `pointer` names), with its
    lineage, the pointers at it and its newest release receipt in the manifest."""
    from lightningstore.gate import gate_records

    if version_id is not None:
        version = await store.get_resource_version(version_id)
        if version is None or version.name != resource_name:
            raise LookupError(f"version {version_id!r} of resource {resource_name!r} is not in the store")
    else:
        version = await store.get_pointer(resource_name, pointer)
        if version is None:
            raise LookupError(f"resource {resource_name!r} has no {pointer!r} version in the store")
    checkpoint = getattr(version.resource, "checkpoint", None)
    if not checkpoint:
        raise ValueError(f"version {version.version_id!r} is not an LLM with a checkpoint to export")
    lineage = [version.version_id]
    parent = version.parent_id
    while parent is not None and len(lineage) < 10_000:
        found = await store.get_resource_version(parent)
        if found is None:
            break
        lineage.insert(0, found.version_id)
        parent = found.parent_id
    pointers = [
        name
        for name in ("latest", "approved")
        if (at := await store.get_pointer(resource_name, name)) is not None
        and at.version_id == version.version_id
    ]
    receipts = await gate_records(store).list_receipts(
        resource_name=resource_name, candidate_version_id=version.version_id
    )
    manifest = {
        "resource_name": resource_name,
        "version_id": version.version_id,
        "pointers": pointers,
        "lineage": lineage,
        "receipt_id": receipts[-1].receipt_id if receipts else None,
        "metadata": {
            k: v for k, v in (version.metadata or {}).items() if k in ("step", "plan_id", "algorithm_config")
        },
    }
    return export_checkpoint(checkpoint, out_dir, manifest=manifest)
