"""Checking a Hugging Face checkpoint directory before anything is started on it.

`fit` and `lightningrl train` call `check_checkpoint` first: a directory that lacks a piece (config,
weights, tokenizer, chat template, an end-of-sequence token that ends the template's turns) fails
with one `CheckpointError` that lists every missing piece and how to supply it, before a process is
started. Only the config and the tokenizer are loaded (about a second); weights are looked at on disk.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lightningrl.models.adapter import ADAPTER_WEIGHTS, is_adapter_dir

WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
PROBE_CONTENT = "LIGHTNINGRL_PROBE_7f3a"
"""An assistant message's text, rendered to find what the chat template writes after a turn."""


class CheckpointError(ValueError):
    """A model directory that cannot be trained or served as it is; `problems` lists each piece."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        lines = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(f"model {str(path)!r} is not ready to train:\n{lines}")


@dataclass(frozen=True)
class CheckpointReport:
    """What `check_checkpoint` found in a directory that passed."""

    path: Path
    architecture: str
    weights: str
    eos_token: str
    eos_token_ids: tuple[int, ...]
    pad_token: str | None
    end_of_turn: str | None
    adapter: bool = False
    notes: list[str] = field(default_factory=list)


def end_of_turn_token(tokenizer: Any) -> str | None:
    """The special token the chat template writes right after an assistant message, if there is one.

    Rendered, not guessed: ChatML gives `<|im_end|>`, Llama-3 `<|eot_id|>`, Gemma `<end_of_turn>`.
    """
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": PROBE_CONTENT}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    if PROBE_CONTENT not in text:
        return None
    after = text[text.index(PROBE_CONTENT) + len(PROBE_CONTENT) :].lstrip(" ")
    specials = sorted(
        {str(t) for t in tokenizer.all_special_tokens}
        | {str(t) for t in getattr(tokenizer, "added_tokens_decoder", {}).values() if t.special},
        key=len,
        reverse=True,
    )
    return next((token for token in specials if token and after.startswith(token)), None)


def generation_eos_ids(path: Path) -> list[int]:
    """The `eos_token_id` of a directory's `generation_config.json` (or `config.json`), as a list."""
    for name in ("generation_config.json", "config.json"):
        file = path / name
        if file.is_file():
            value = json.loads(file.read_text()).get("eos_token_id")
            if isinstance(value, int):
                return [value]
            if isinstance(value, list):
                return [int(v) for v in value]
    return []


def check_checkpoint(path: str | Path, *, chat_template: str | None = None) -> CheckpointReport:
    """Check that `path` is a model directory training and serving can use; raise `CheckpointError`.

    A directory that does not exist raises FileNotFoundError.
    A LoRA adapter directory (see `lightningrl.models.adapter`) is checked as its weights plus its base.
    `chat_template` (a Jinja string) stands in for a tokenizer that has none.
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"model directory {str(path)!r} does not exist")
    if is_adapter_dir(path):
        return _check_adapter(path, chat_template)
    problems: list[str] = []
    architecture = _config_problems(path, problems)
    weights = next((name for name in WEIGHT_FILES if (path / name).is_file()), None)
    if weights is None:
        problems.append(
            "no weights: expected one of "
            + ", ".join(WEIGHT_FILES)
            + " (save with `model.save_pretrained(DIR)`)"
        )
    report = _tokenizer_report(path, problems, chat_template)
    if problems:
        raise CheckpointError(path, problems)
    assert report is not None
    return CheckpointReport(path=path, architecture=architecture, weights=weights or "", **report)


def _check_adapter(path: Path, chat_template: str | None) -> CheckpointReport:
    from lightningrl.models.adapter import base_of

    problems: list[str] = []
    if not (path / ADAPTER_WEIGHTS).is_file():
        problems.append(f"LoRA adapter without {ADAPTER_WEIGHTS}")
    try:
        base = base_of(path)
    except FileNotFoundError as error:
        raise CheckpointError(path, [*problems, str(error)]) from None
    if problems:
        raise CheckpointError(path, problems)
    base_report = check_checkpoint(base, chat_template=chat_template)
    return dataclasses.replace(base_report, path=path, weights=ADAPTER_WEIGHTS, adapter=True)


def _config_problems(path: Path, problems: list[str]) -> str:
    """The config's architecture name; what is wrong with the config goes to `problems`."""
    config_file = path / "config.json"
    if not config_file.is_file():
        problems.append("no config.json: this is not a Hugging Face checkpoint directory")
        return ""
    try:
        config = json.loads(config_file.read_text())
    except json.JSONDecodeError as error:
        problems.append(f"config.json is not valid JSON ({error})")
        return ""
    architectures = config.get("architectures") or []
    if not config.get("model_type"):
        problems.append(
            "config.json has no `model_type`: transformers cannot tell which architecture to build"
        )
    elif not architectures:
        problems.append('config.json has no `architectures` (e.g. ["LlamaForCausalLM"])')
    else:
        from transformers import AutoConfig

        try:
            AutoConfig.from_pretrained(path)
        except (ValueError, KeyError, OSError) as error:
            problems.append(f"config.json does not load in transformers: {error}")
    return str(architectures[0]) if architectures else ""


def _tokenizer_report(path: Path, problems: list[str], chat_template: str | None) -> dict[str, Any] | None:
    """The tokenizer's part of the report; what is missing goes to `problems`."""
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        problems.append(
            "no tokenizer: expected tokenizer.json (or tokenizer.model / vocab.json); "
            "save the tokenizer beside the model with `tokenizer.save_pretrained(DIR)`"
        )
        return None
    from transformers import AutoTokenizer

    from lightningrl.quiet import quiet_third_party

    try:
        with quiet_third_party():
            tokenizer = AutoTokenizer.from_pretrained(path)
    except (ValueError, OSError, TypeError) as error:
        problems.append(f"the tokenizer does not load: {error}")
        return None
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    if not tokenizer.chat_template:
        problems.append(
            "the tokenizer has no chat template: the inference server renders every request with it. "
            "Supply one with `lightningrl model check DIR --chat-template FILE.jinja --write`, or "
            "`tokenizer.chat_template = ...; tokenizer.save_pretrained(DIR)`"
        )
        return None
    try:
        end_of_turn = end_of_turn_token(tokenizer)
    except Exception as error:  # noqa: BLE001 - a template's Jinja can raise anything
        problems.append(f"the chat template does not render a user/assistant exchange: {error}")
        return None
    eos = tokenizer.eos_token
    eos_ids = sorted({*generation_eos_ids(path), *([tokenizer.eos_token_id] if eos is not None else [])})
    if eos is None:
        problems.append(
            "the tokenizer has no eos_token: set it to the token that ends the assistant's turn"
            + (f" ({end_of_turn!r})" if end_of_turn else "")
            + " in tokenizer_config.json"
        )
    elif end_of_turn is not None and end_of_turn != eos:
        turn_id = tokenizer.convert_tokens_to_ids(end_of_turn)
        if turn_id not in eos_ids:
            problems.append(
                f"eos_token is {eos!r} but the chat template ends a turn with {end_of_turn!r}: a generation "
                f"would run past the end of its answer. Set eos_token to {end_of_turn!r} in "
                "tokenizer_config.json (or add its id to generation_config.json's eos_token_id); "
                "`lightningrl model import` does this for GGUF files"
            )
    if problems:
        return None
    notes = []
    if tokenizer.pad_token is None:
        notes.append("no pad token: the eos token pads (left padding is never attended to)")
    return {
        "eos_token": str(eos),
        "eos_token_ids": tuple(eos_ids),
        "pad_token": tokenizer.pad_token,
        "end_of_turn": end_of_turn,
        "notes": notes,
    }
