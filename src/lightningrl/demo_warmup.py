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

from lightningrl.demo_flags import demo_warmup_config
from lightningrl.warmup import WarmupConfig, supervised_warmup

Demonstration = tuple[Any, ...]
"""(messages, completion) or (messages, completion, tools), as `supervised_warmup` takes them."""


def add_two_phase_flags(parser: argparse.ArgumentParser, tools_steps: int = 60) -> None:
    """The flags of `two_phase_warmup` (the shared warm-up flags of `add_demo_flags` drive phase 1)."""
    parser.add_argument(
        "--warmup-tools-steps", type=int, default=tools_steps, help="phase 2: steps on the exact prompts"
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
) -> Path:
    """Warm `base` up on `short` demonstrations (no tool listing), then on `full` (the agent's prompts);
    return the warmed-up model directory (`out/model-warmup`). `short=None`: the `full` demonstrations
    without their `tools`."""
    if short is None:
        short = [demo[:2] for demo in full]
    if args.warmup_phase1_from:
        phase1 = Path(shutil.copytree(args.warmup_phase1_from, out / "model-warmup-short"))
        console.print(f"reusing phase 1 of the warm-up from {args.warmup_phase1_from}")
    else:
        phase1, losses = supervised_warmup(
            base,
            list(short),
            out / "model-warmup-short",
            demo_warmup_config(args, batch_size=phase1_batch),
            console=console,
        )
        console.print(f"warm-up phase 1 (no tool listing): {len(losses)} steps, loss {losses[-1]:.3f}")
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
    )
    return warm
