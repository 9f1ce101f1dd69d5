"""Copy checks: does a warmed-up model copy what a demonstration's random choice decided (teacher-forced)?"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from lightningrl.demos.demonstrations import Demonstration, encode_demonstration


@dataclass(frozen=True)
class CopyCheck:
    """A demonstration whose completion is fixed once its `prefix` is written: the prefix holds the
    demonstration's random choice (`plus add`), and the rest must follow from it and the prompt (the tool
    call copying the choice and the question's words)."""

    demonstration: Demonstration
    prefix: str = ""


EncodedCheck = tuple[list[int], list[int], int]
"""(prompt ids, completion ids, how many completion ids the prefix takes)."""


def encode_check(tokenizer, check: CopyCheck) -> EncodedCheck:
    prompt, completion = encode_demonstration(tokenizer, *check.demonstration)
    prefix = tokenizer(check.prefix, add_special_tokens=False)["input_ids"] if check.prefix else []
    if completion[: len(prefix)] != prefix:
        raise ValueError(f"CopyCheck.prefix {check.prefix!r} does not tokenize as its completion's start")
    return prompt, completion, len(prefix)


def copied_share(model, tokenizer, checks: Sequence[EncodedCheck]) -> float:
    """Share of `checks` whose completion after the prefix is the model's greedy choice at every token
    (teacher-forced, one batched forward pass)."""
    if not checks:
        raise ValueError("copied_share needs at least one check")
    length = max(len(p) + len(c) for p, c, _ in checks)
    ids = torch.full((len(checks), length), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(checks), length), dtype=torch.long)
    for row, (p, c, _) in enumerate(checks):
        ids[row, : len(p) + len(c)] = torch.tensor(p + c)
        mask[row, : len(p) + len(c)] = 1
    was_training = model.training
    model.eval()
    with torch.no_grad():
        predicted = model(input_ids=ids, attention_mask=mask).logits.argmax(-1)
    model.train(was_training)
    copied = 0
    for row, (p, c, start) in enumerate(checks):
        guesses = predicted[row, len(p) + start - 1 : len(p) + len(c) - 1].tolist()
        copied += guesses == c[start:]
    return copied / len(checks)
