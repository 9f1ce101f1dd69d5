"""The example demos' two-phase warm-up for agents that call tools by function calling.

Phase 1 is cheap: the demonstrations rendered WITHOUT the tool listing (a prompt of tens of tokens
instead of hundreds), for as long as the copying skills take to emerge (the question's words into the
call: that happens suddenly, after some hundred to some thousand steps). Phase 2 is short: the agent's
exact prompts, with the tools listed as the inference server renders them, at a third of the learning
rate, so the model carries what it learned over to the long prompts.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from transformers import AutoModelForCausalLM, AutoTokenizer

from lightningrl.demos.copy_checks import CopyCheck, copied_share, encode_check
from lightningrl.demos.flags import demo_warmup_config
from lightningrl.demos.tinylm import load_spec, save_tiny_model
from lightningrl.demos.warmup import WarmupConfig, supervised_warmup
from lightningrl.quiet import quiet_third_party

Demonstration = tuple[Any, ...]
"""(messages, completion) or (messages, completion, tools), as `supervised_warmup` takes them."""


def add_two_phase_flags(
    parser: argparse.ArgumentParser,
    tools_steps: int = 60,
    until_copied: float | None = None,
    restarts: int = 0,
) -> None:
    """The flags of `two_phase_warmup` (the shared warm-up flags of `add_demo_flags` drive phase 1)."""
    parser.add_argument(
        "--warmup-tools-steps", type=int, default=tools_steps, help="phase 2: steps on the exact prompts"
    )
    parser.add_argument(
        "--warmup-until-copied",
        type=float,
        default=until_copied,
        help="phase 1 goes on (up to --warmup-max-steps) until this share of the copy checks is copied",
    )
    parser.add_argument(
        "--warmup-restarts",
        type=int,
        default=restarts,
        help="phase 1 starts again from fresh weights this many times at most if the copies do not emerge",
    )
    parser.add_argument(
        "--warmup-phase1-from", default=None, help="reuse phase 1 of the warm-up (a model directory)"
    )


def two_phase_warmup(
    base: Path,
    short: Sequence[Demonstration] | None,
    full: Sequence[Demonstration],
    out: Path,
    args: argparse.Namespace,
    console: Console,
    *,
    phase1_batch: int = 32,
    phase2_batch: int = 16,
    checks: Sequence[CopyCheck] = (),
    short_checks: Sequence[CopyCheck] | None = None,
) -> Path:
    """Warm `base` up on `short` demonstrations (no tool listing), then on `full` (the agent's prompts);
    return the warmed-up model directory (`out/model-warmup`). `short=None`: the `full` demonstrations
    without their `tools`. `checks` (the agent's prompts) and `short_checks` (phase 1's; None: `checks`
    without their tools) measure the copies after each phase, and `--warmup-until-copied` keeps phase 1
    going until they hold."""
    if short is None:
        short = [demo[:2] for demo in full]
    if short_checks is None:
        short_checks = [CopyCheck(check.demonstration[:2], check.prefix) for check in checks]
    if args.warmup_phase1_from:
        phase1 = Path(shutil.copytree(args.warmup_phase1_from, out / "model-warmup-short"))
        console.print(f"reusing phase 1 of the warm-up from {args.warmup_phase1_from}")
    else:
        phase1 = _phase_one(base, short, short_checks, out, args, console, phase1_batch)
    warm, losses = supervised_warmup(
        phase1,
        list(full),
        out / "model-warmup",
        WarmupConfig(
            steps=args.warmup_tools_steps, batch_size=phase2_batch, lr=args.warmup_lr / 3, seed=args.seed
        ),
        console=console,
    )
    console.print(
        f"warm-up phase 2 (the agent's prompts, tools listed): {len(losses)} steps, loss {losses[-1]:.3f}"
        + _copied_text(warm, checks)
    )
    return warm


def _phase_one(
    base: Path,
    short: Sequence[Demonstration],
    checks: Sequence[CopyCheck],
    out: Path,
    args: argparse.Namespace,
    console: Console,
    batch: int,
) -> Path:
    """Phase 1, restarted from fresh weights (the same tiny model, another seed) up to
    `--warmup-restarts` times while the copy checks do not reach `--warmup-until-copied`: whether a copy
    emerges within a few thousand steps depends on the initial weights (one seed of the retrieval demo:
    not in 2,000 steps; the same data from other weights: in 782)."""
    until_copied = args.warmup_until_copied if checks else None
    attempts = 1 + (args.warmup_restarts if until_copied is not None else 0)
    start = base
    for attempt in range(attempts):
        if attempt:
            spec = load_spec(base)
            seed = spec.seed + 1000 * attempt
            console.print(f"warm-up phase 1: restarting from fresh weights (model seed {seed})")
            start = save_tiny_model(spec.model_copy(update={"seed": seed}), out / f"model-base-{attempt}")
        phase1, losses = supervised_warmup(
            start,
            list(short),
            out / "model-warmup-short",
            demo_warmup_config(args, batch_size=batch, until_copied=until_copied),
            console=console,
            checks=checks,
        )
        share = _share(phase1, checks) if checks else None
        copied = f", copied {share:.2f} of {len(checks)} checks" if share is not None else ""
        console.print(
            f"warm-up phase 1 (no tool listing): {len(losses)} steps, loss {losses[-1]:.3f}{copied}"
        )
        if until_copied is None or (share is not None and share >= until_copied):
            return phase1
        console.print(f"[yellow]the copies did not emerge ({share:.2f} < {until_copied:.2f})")
    console.print("[yellow]warning: RL starts from a warm-up that does not copy reliably")
    return phase1


def call_checks(demonstrations: Sequence[Demonstration]) -> list[CopyCheck]:
    """Copy checks from demonstrations whose completion is a hermes tool call: everything the model
    writes before `<tool_call>` (its thought, holding the random choice) is the prefix."""
    return [
        CopyCheck(tuple(demo), demo[1].split("<tool_call>")[0])  # type: ignore[arg-type]
        for demo in demonstrations
        if "<tool_call>" in demo[1]
    ]


def _share(model_dir: Path, checks: Sequence[CopyCheck]) -> float:
    with quiet_third_party():
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir)
    return copied_share(model, tokenizer, [encode_check(tokenizer, check) for check in checks])


def _copied_text(model_dir: Path, checks: Sequence[CopyCheck]) -> str:
    return f", copied {_share(model_dir, checks):.2f} of {len(checks)} checks" if checks else ""
