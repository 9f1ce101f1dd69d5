"""`lightningrl model import` on the real SmolLM2 GGUF file, and `check_checkpoint` on broken directories."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from fit_agents import reply_length_agent, subprocess_env
from transformers import AutoModelForCausalLM, AutoTokenizer

from lightningrl import fit
from lightningrl.demos.tinylm.builder import build_tiny_model
from lightningrl.models import (
    CheckpointError,
    ModelImportError,
    cached_model,
    check_checkpoint,
    import_model,
    import_record,
)


@pytest.fixture(scope="module")
def smollm2() -> Path:
    return cached_model("smollm2")  # scripts/setup imported it; this reuses the cache


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    return build_tiny_model(tmp_path / "tiny", seed=0, tokenizer_kind="word", hidden_size=32, num_layers=1)


def test_import_writes_a_checked_hf_directory(smollm2: Path) -> None:
    record = import_record(smollm2)
    assert record is not None and record.architecture == "llama" and record.dtype == "float32"
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    # The trap of the GGUF conversion: its eos is <|im_start|> and it has no pad token.
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.eos_token_id == 2
    assert tokenizer.pad_token is not None and tokenizer.pad_token_id != tokenizer.eos_token_id
    generation = json.loads((smollm2 / "generation_config.json").read_text())
    assert generation["eos_token_id"] == 2 and generation["pad_token_id"] == tokenizer.pad_token_id
    config = json.loads((smollm2 / "config.json").read_text())
    assert config["dtype"] == "float32" and config["tie_word_embeddings"] is True
    assert (smollm2 / "model.safetensors").stat().st_size > 500e6  # 134.5M fp32 parameters
    report = check_checkpoint(smollm2)
    assert report.end_of_turn == "<|im_end|>" and report.eos_token == "<|im_end|>"
    assert record.probe_tokens > 0 and record.probe_answer  # it answered and stopped at <|im_end|>


def test_imported_model_stops_at_end_of_turn(smollm2: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    model = AutoModelForCausalLM.from_pretrained(smollm2)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Say hello."}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.no_grad():
        out = model.generate(**prompt, max_new_tokens=40, do_sample=False)
    new = out[0, prompt["input_ids"].shape[1] :].tolist()
    assert new[-1] == tokenizer.eos_token_id and len(new) < 40, tokenizer.decode(new)


def test_import_reuses_the_cache_and_the_cli_says_what_it_did(smollm2: Path) -> None:
    weights = smollm2 / "model.safetensors"
    written = weights.stat().st_mtime_ns
    assert import_model("smollm2", smollm2) == smollm2
    assert weights.stat().st_mtime_ns == written  # same file, same dtype: kept
    cli = [sys.executable, "-m", "lightningrl.cli", "model", "import", "smollm2", str(smollm2)]
    done = subprocess.run(cli, capture_output=True, text=True, timeout=120, check=True)
    assert "eos '<|im_end|>'" in done.stdout and "stopped" in done.stdout
    assert done.stderr == ""  # no third-party chatter
    checked = subprocess.run(
        [sys.executable, "-m", "lightningrl.cli", "model", "check", str(smollm2)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0 and ": ok (LlamaForCausalLM" in checked.stdout


def _write_gguf(path: Path, architecture: str, tensor_type: str) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(1)
    kind = gguf.GGMLQuantizationType[tensor_type]
    if kind == gguf.GGMLQuantizationType.F32:
        writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    else:
        block, size = gguf.GGML_QUANT_SIZES[kind]
        writer.add_tensor("token_embd.weight", np.zeros((1, size), dtype=np.uint8), raw_dtype=kind)
        assert block > 0
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_import_refuses_what_transformers_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(ModelImportError, match="architecture 'rwkv6'"):
        import_model(_write_gguf(tmp_path / "a.gguf", "rwkv6", "F32"), tmp_path / "out-a")
    with pytest.raises(ModelImportError, match="Q8_K"):
        import_model(_write_gguf(tmp_path / "q.gguf", "llama", "Q8_K"), tmp_path / "out-q")
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf file at all")
    with pytest.raises(ModelImportError, match="junk.gguf"):
        import_model(tmp_path / "junk.gguf", tmp_path / "out-j")
    with pytest.raises(ModelImportError, match="neither a known name"):
        import_model("llama-70b", tmp_path / "out-n")
    with pytest.raises(ModelImportError, match="dtype 'int4'"):
        import_model("smollm2", tmp_path / "out-d", dtype="int4")
    assert not any(p.name.startswith("out-") for p in tmp_path.iterdir())  # nothing half-written


def test_check_names_every_missing_piece(tiny: Path, tmp_path: Path) -> None:
    assert check_checkpoint(tiny).weights == "model.safetensors"
    broken = tmp_path / "broken"
    shutil.copytree(tiny, broken)
    (broken / "model.safetensors").unlink()
    config = json.loads((broken / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (broken / "tokenizer_config.json").write_text(json.dumps(config))
    (broken / "chat_template.jinja").unlink(missing_ok=True)
    with pytest.raises(CheckpointError) as caught:
        check_checkpoint(broken)
    problems = caught.value.problems
    assert len(problems) == 2, problems
    assert "no weights" in problems[0] and "save_pretrained" in problems[0]
    assert "no chat template" in problems[1] and "--chat-template" in problems[1]
    template = (tiny / "chat_template.jinja").read_text() if (tiny / "chat_template.jinja").exists() else None
    template = template or AutoTokenizer.from_pretrained(tiny).chat_template
    shutil.copy(tiny / "model.safetensors", broken / "model.safetensors")
    assert check_checkpoint(broken, chat_template=template).end_of_turn is not None

    (broken / "config.json").unlink()
    with pytest.raises(CheckpointError, match="no config.json"):
        check_checkpoint(broken, chat_template=template)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        check_checkpoint(tmp_path / "nowhere")


def test_check_refuses_an_eos_that_does_not_end_the_turn(tiny: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong-eos"
    shutil.copytree(tiny, wrong)
    tokenizer = AutoTokenizer.from_pretrained(wrong)
    turn_end = check_checkpoint(tiny).end_of_turn
    other = next(t for t in tokenizer.all_special_tokens if t != turn_end)
    tokenizer.eos_token = other
    tokenizer.save_pretrained(wrong)
    for name in ("generation_config.json", "config.json"):
        data = json.loads((wrong / name).read_text())
        data["eos_token_id"] = tokenizer.convert_tokens_to_ids(other)
        (wrong / name).write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match=f"eos_token is {other!r} but the chat template ends a turn"):
        check_checkpoint(wrong)


def test_fit_and_train_check_the_model_before_starting_anything(tiny: Path, tmp_path: Path) -> None:
    broken = tmp_path / "no-tokenizer"
    shutil.copytree(tiny, broken)
    for name in ("tokenizer.json", "vocab.json", "tokenizer.model"):
        (broken / name).unlink(missing_ok=True)
    out = tmp_path / "run"
    with pytest.raises(CheckpointError, match="no tokenizer"):
        fit(reply_length_agent, [{"x": 1}], model=broken, output_dir=out)
    assert not out.exists()  # no store, no logs, no process
    (tmp_path / "train.jsonl").write_text('{"x": 1}\n')
    (tmp_path / "train.toml").write_text(
        f'agent = "fit_agents:reply_length_agent"\ntrain = "train.jsonl"\nmodel = "{broken}"\n'
        f'output_dir = "{out}"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "lightningrl.cli", "train", "--config", str(tmp_path / "train.toml")],
        capture_output=True,
        text=True,
        timeout=120,
        env=subprocess_env(),
    )
    assert done.returncode != 0 and "no tokenizer" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert not out.exists()
