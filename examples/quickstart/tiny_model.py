"""The quickstart's model and tasks: a tiny Qwen2-style model built here (nothing is downloaded), warmed
up to answer `yes` or `no` at random. Every task needs the tool, so RL has to teach it to say yes."""

from __future__ import annotations

from pathlib import Path

from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.demos.warmup import WarmupConfig, supervised_warmup

COMMANDS = {"mirror": ["reverse", "flip", "mirror", "turn around"]}
WORDS = ["cat", "dog", "sun", "tree", "lamp", "rock", "bird", "fish", "moon", "road", "cup", "hat"]


def question(command: str, word: str) -> str:
    return f"{word}: {command} it? Use the mirror tool?"


def tiny_model(out: str | Path = "runs/quickstart/model", seed: int = 0) -> Path:
    """Build and warm up the model once (about a minute on a CPU); later calls reuse it."""
    out = Path(out).resolve()
    if (out / "warm" / "config.json").is_file():
        return out / "warm"
    prompts = [question(c, w) for commands in COMMANDS.values() for c in commands for w in WORDS]
    base = build_tiny_model(out / "base", seed=seed, tokenizer_kind="word", extra_text=[*prompts, "yes no"],
                            hidden_size=64, num_heads=2)  # fmt: skip
    demos = [([{"role": "user", "content": p}], answer) for p in prompts for answer in ("yes", "no")]
    warm, _ = supervised_warmup(base, demos, out / "warm", WarmupConfig(steps=150, lr=1e-2, seed=seed))
    return warm


def tasks(split: str) -> list[dict[str, str]]:
    """Every (command, word) pair; the held-out split keeps three words unseen in training."""
    words = WORDS[:-3] if split == "train" else WORDS[-3:]
    return [
        {"command": c, "word": w, "kind": kind} for kind, cs in COMMANDS.items() for c in cs for w in words
    ]
