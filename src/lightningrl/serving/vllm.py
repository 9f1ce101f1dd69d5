"""vLLM as the serving engine: where its interpreter is, the command and environment that start its
own OpenAI server (`python -m vllm.entrypoints.openai.api_server`), and the checks before starting it.

vLLM lives in an environment of its own (`scripts/setup-vllm` builds `.venv-vllm`): its pinned
`transformers` conflicts with verl's. Nothing here imports vllm. Facts and traps: docs/serving.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

PYTHON_ENV = "LIGHTNINGRL_VLLM_PYTHON"
"""The interpreter of the environment vLLM is installed in (default: `.venv-vllm/bin/python`)."""
VENV_NAME = ".venv-vllm"
KV_CACHE_GIB = "1"
"""vLLM-CPU reserves KV cache from RAM; without a size it asks for 92% of the machine and fails."""
TOOL_PARSER = "hermes"
"""Matches the tinylm chat template (`<tool_call>{json}</tool_call>`); Qwen2.5 models use it too."""
_REPO_ROOT = Path(__file__).resolve().parents[3]
EXTENSION_PATH = Path(__file__).resolve().parent / "vllm_ext"
"""Put on vLLM's PYTHONPATH: the worker extension lives there (it imports nothing of ours)."""
WORKER_EXTENSION = "lightningrl_vllm_ext.WeightSyncExtension"
RELOAD_METHOD = "lightningrl_reload_weights"
"""The extension's reload: vLLM's `reload_weights`, then tied output heads rebuilt from the new embedding."""


class VllmUnavailable(RuntimeError):
    """No interpreter with vLLM was found (or the one named cannot run)."""


def _candidates() -> list[Path]:
    """Default places of `.venv-vllm`: the working directory, then this source checkout's root."""
    places = [Path.cwd() / VENV_NAME / "bin" / "python", _REPO_ROOT / VENV_NAME / "bin" / "python"]
    return list(dict.fromkeys(places))


def find_vllm_python(explicit: str | Path | None = None) -> str | None:
    """The interpreter to start vLLM with: `explicit`, else $LIGHTNINGRL_VLLM_PYTHON, else a
    `.venv-vllm` that exists; None when none is found (an explicit path is returned unchecked)."""
    if explicit:
        return str(explicit)
    if os.environ.get(PYTHON_ENV):
        return os.environ[PYTHON_ENV]
    for candidate in _candidates():
        if candidate.is_file():
            return str(candidate)
    return None


def vllm_python(explicit: str | Path | None = None) -> str:
    """`find_vllm_python`, or VllmUnavailable saying how to get one."""
    found = find_vllm_python(explicit)
    if found is None:
        raise VllmUnavailable(
            f"no vLLM interpreter: run scripts/setup-vllm (builds {VENV_NAME}), or give --vllm-python "
            f"PATH / set {PYTHON_ENV} to the python of an environment with vllm installed"
        )
    if not (Path(found).is_file() or shutil.which(found)):
        raise VllmUnavailable(f"the vLLM interpreter {found!r} does not exist")
    return found


def has_cuda() -> bool:
    """Whether this machine has an NVIDIA GPU (without importing torch)."""
    if not shutil.which("nvidia-smi"):
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def vllm_importable(python: str) -> bool:
    """Whether `python` can import vllm (found without importing it: ~50 ms, not vLLM's 5 s)."""
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    try:
        return subprocess.run([python, "-c", probe], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def resolve_engine(engine: str, vllm_python_path: str | Path | None = None) -> str:
    """The engine to start: "ours" or "vllm". "auto" is vLLM when a GPU is present and an
    interpreter that can import vllm is found, else ours."""
    if engine not in ("auto", "ours", "vllm"):
        raise ValueError(f"engine must be one of ('auto', 'ours', 'vllm'), got {engine!r}")
    if engine != "auto":
        return engine
    if not has_cuda():
        return "ours"
    python = find_vllm_python(vllm_python_path)
    return "vllm" if python and vllm_importable(python) else "ours"


def tied_output_head(checkpoint: str | Path) -> bool:
    """Whether the checkpoint ties its output head to the input embeddings (config.json)."""
    config = json.loads((Path(checkpoint) / "config.json").read_text())
    text = config.get("text_config") or {}
    return bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))


WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt")


def check_reloadable(checkpoint: str | Path) -> None:
    """Refuse a directory vLLM cannot reload in place: `reload_weights` re-reads its config and weight
    files. A tied output head is reloadable: the sync calls `RELOAD_METHOD`, which rebuilds it."""
    path = Path(checkpoint)
    if not (path / "config.json").is_file():
        raise ValueError(f"checkpoint {str(checkpoint)!r} has no config.json: vLLM cannot reload it in place")
    if not any(next(path.glob(pattern), None) for pattern in WEIGHT_FILES):
        raise ValueError(
            f"checkpoint {str(checkpoint)!r} has no weight files ({', '.join(WEIGHT_FILES)}): vLLM's "
            "in-place reload reads the directory's weights"
        )


def tools_chat_template(checkpoint: str | Path) -> Path | None:
    """For a checkpoint whose chat template has no tool section, a template file that renders tools,
    tool calls and results as our server does (`tool_prompt.hermes_chat_template`), written once
    per content in the temp directory; None when the model's own template renders tools."""
    from transformers import AutoTokenizer

    from lightningrl.serving.tool_prompt import hermes_chat_template, renders_tools

    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    if not isinstance(tokenizer.chat_template, str) or renders_tools(tokenizer):
        return None
    text = hermes_chat_template(tokenizer.chat_template)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / "lightningrl-vllm" / f"chat-template-{digest}.jinja"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(text)
        partial.replace(path)  # atomic: another launcher may write the same file
    return path


def checkpoint_dtype(checkpoint: str | Path) -> str:
    """The dtype the checkpoint declares (config.json `dtype` / `torch_dtype`), else "auto".

    vLLM's "auto" serves float32 weights in bfloat16 on a CPU; the declared dtype keeps served
    logprobs equal to the trainer's forward pass.
    """
    config = json.loads((Path(checkpoint) / "config.json").read_text())
    dtype = config.get("dtype") or config.get("torch_dtype")
    return dtype if isinstance(dtype, str) else "auto"


def vllm_command(
    checkpoint: str | Path,
    *,
    port: int,
    python: str,
    host: str = "127.0.0.1",
    dtype: str | None = None,
    served_model_name: str | None = None,
    max_model_len: int | None = None,
    enforce_eager: bool = False,
    lora_rank: int = 0,
    max_loras: int = 2,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """vLLM's own OpenAI server on `checkpoint`, with what our proxy and weight sync rely on: token ids
    and raw logprobs (its defaults), hermes tool calls (rendered as our server renders them when the
    model's template has no tool section, unless `extra_args` name a `--chat-template`), the worker
    extension that reloads tied heads, and (with `lora_rank`) runtime LoRA adapters."""
    command = [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        *("--model", str(checkpoint)),
        *("--host", host, "--port", str(port)),
        *("--dtype", dtype or checkpoint_dtype(checkpoint)),
        "--enable-auto-tool-choice",
        *("--tool-call-parser", TOOL_PARSER),
        "--disable-uvicorn-access-log",
        *("--worker-extension-cls", WORKER_EXTENSION),
    ]
    if served_model_name:
        command += ["--served-model-name", served_model_name]
    if max_model_len:
        command += ["--max-model-len", str(max_model_len)]
    if enforce_eager:
        command.append("--enforce-eager")
    if lora_rank:
        command += ["--enable-lora", "--max-lora-rank", str(lora_rank), "--max-loras", str(max_loras)]
    template = None if "--chat-template" in extra_args else tools_chat_template(checkpoint)
    if template is not None:
        # "string": vLLM hands the template each message's text parts joined, as our server does.
        command += ["--chat-template", str(template), "--chat-template-content-format", "string"]
    return command + list(extra_args)


def vllm_env(cache_dir: str | Path | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for vLLM's server: the dev routes weight sync uses (`/collective_rpc`,
    `/reset_prefix_cache`, `/pause`), runtime LoRA loading, a KV cache that fits a CPU machine, and
    a PYTHONPATH of our worker extension only (ours points at packages whose versions vLLM's
    environment does not share)."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = str(EXTENSION_PATH)  # replaced, not absent: a supervisor merges ours back in
    env["VLLM_SERVER_DEV_MODE"] = "1"
    env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GIB)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if cache_dir is not None:
        env.setdefault("VLLM_CACHE_ROOT", str(cache_dir))
    return env


def exec_vllm(command: Sequence[str], env: Mapping[str, str]) -> None:
    """Replace this process with vLLM's server (signals reach it directly); never returns."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(command[0], list(command), dict(env))
