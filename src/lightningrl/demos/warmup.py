"""Supervised warm-up: teach a tiny model a task's format on generated demonstrations (before RL)."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Console
from transformers import AutoModelForCausalLM, AutoTokenizer

from lightningrl.demos.copy_checks import CopyCheck, copied_share, encode_check
from lightningrl.demos.demonstrations import Demonstration, encode_demonstration
from lightningrl.quiet import quiet_third_party
from lightningrl.rl.progress import StepProgress


@dataclass(frozen=True)
class WarmupConfig:
    steps: int = 300
    batch_size: int = 32
    lr: float = 3e-3
    seed: int = 0
    weight_decay: float = 0.0
    until_loss: float | None = None
    """Keep going after `steps` (at the schedule's floor) until the mean loss of the last
    `loss_window` steps is at most this, up to `max_steps`: a skill that emerges late for some seeds
    (copying a number, say) is then learned every time, and quick seeds stop at `steps`."""
    max_steps: int | None = None
    loss_window: int = 30
    until_copied: float | None = None
    """Keep going after `steps` until at least this share of the `checks` handed to `supervised_warmup`
    is copied (checked every `check_every` steps), up to `max_steps`: a copy that has not emerged (a
    choice carried from the model's own words into its tool call, say) barely shows in the mean loss."""
    check_every: int = 50

    def __post_init__(self) -> None:
        for name in ("until_loss", "until_copied"):
            if getattr(self, name) is not None and (self.max_steps is None or self.max_steps < self.steps):
                raise ValueError(
                    f"{name} needs max_steps >= steps ({self.steps}), got max_steps={self.max_steps!r}"
                )
        if self.until_copied is not None and not 0 < self.until_copied <= 1:
            raise ValueError(f"until_copied must be in (0, 1], got {self.until_copied!r}")

    @property
    def open_ended(self) -> bool:
        """True when a target (loss or copies) may carry training past `steps`."""
        return (self.until_loss is not None or self.until_copied is not None) and bool(self.max_steps)


def warmup_cosine(step: int, total: int, warmup_fraction: float = 0.05, floor: float = 0.1) -> float:
    """LR multiplier: linear warm-up, then cosine decay to `floor`."""
    import math

    warm = max(1, int(total * warmup_fraction))
    if step < warm:
        return (step + 1) / warm
    progress = min(1.0, (step - warm) / max(1, total - warm))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def supervised_warmup(
    model_dir: str | Path,
    demonstrations: Sequence[Demonstration],
    out_dir: str | Path,
    config: WarmupConfig | None = None,
    *,
    show_progress: bool = True,
    console: Console | None = None,
    report_every: int | None = None,
    checks: Sequence[CopyCheck] = (),
) -> tuple[Path, list[float]]:
    """Fine-tune on completions only (prompt tokens masked); save an HF directory; return (dir, losses).

    `checks` are what `config.until_copied` measures (`copied_share`); their share shows in the progress.

    Progress: a bar on a terminal; otherwise a line every `report_every` steps (default: a tenth of
    them) with the loss and the steps per second since the last line."""
    config = config or WarmupConfig()
    with quiet_third_party():
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.train()
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    encoded = [encode_demonstration(tokenizer, *demonstration) for demonstration in demonstrations]
    encoded_checks = [encode_check(tokenizer, check) for check in checks]
    if config.until_copied is not None and not encoded_checks:
        raise ValueError("WarmupConfig.until_copied needs checks")
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_cosine(step, config.steps))
    pad = tokenizer.pad_token_id
    losses: list[float] = []
    limit = config.max_steps if config.open_ended and config.max_steps else config.steps
    every = report_every or max(1, config.steps // 10)
    progress = StepProgress(
        console or Console(),
        limit,
        bar_label="supervised warm-up",
        line_label="warm-up step",
        every=every,
        enabled=show_progress,
        transient=True,
    )
    with progress:
        rate = _StepRate()
        copied = ""
        for step in range(limit):
            if step >= config.steps and _converged(losses, config):
                if not encoded_checks or (step - config.steps) % config.check_every == 0:
                    share = copied_share(model, tokenizer, encoded_checks) if encoded_checks else 1.0
                    copied = f"  copied {share:.2f}" if encoded_checks else ""
                    if config.until_copied is None or share >= config.until_copied:
                        break
            batch = rng.sample(encoded, min(config.batch_size, len(encoded)))
            length = max(len(p) + len(c) for p, c in batch)
            ids = torch.full((len(batch), length), pad, dtype=torch.long)
            labels = torch.full((len(batch), length), -100, dtype=torch.long)
            mask = torch.zeros((len(batch), length), dtype=torch.long)
            for row, (p, c) in enumerate(batch):
                seq = p + c
                ids[row, : len(seq)] = torch.tensor(seq)
                labels[row, len(p) : len(seq)] = torch.tensor(c)
                mask[row, : len(seq)] = 1
            loss = completion_loss(model, ids, mask, labels)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            progress.advance(f"loss {losses[-1]:.3f}{copied}  {rate.tick(every):.1f} steps/s")
    out = Path(out_dir)
    model.eval()
    with quiet_third_party():
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    return out, losses


def completion_loss(
    model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """The causal LM loss of `labels` (-100: not scored), as `model(..., labels=labels).loss`, with the
    vocabulary head only at the positions that predict a scored token: a demonstration's prompt is ~10x
    its completion, and the head is ~20% of a small model's forward."""
    hidden = model.get_decoder()(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, L, H)
    targets = labels[:, 1:]
    scored = targets != -100
    logits = model.get_output_embeddings()(hidden[:, :-1][scored])  # (N, V), N scored tokens
    return torch.nn.functional.cross_entropy(logits.float(), targets[scored])


def _converged(losses: list[float], config: WarmupConfig) -> bool:
    """True when no target is set, or the mean of the last `loss_window` losses reached it."""
    if config.until_loss is None:
        return True
    window = losses[-config.loss_window :]
    return len(window) == config.loss_window and sum(window) / len(window) <= config.until_loss


class _StepRate:
    """Steps per second over the last `window` steps (what a progress line reports)."""

    def __init__(self) -> None:
        self._times: list[float] = [time.perf_counter()]

    def tick(self, window: int) -> float:
        self._times.append(time.perf_counter())
        del self._times[: -(window + 1)]
        elapsed = self._times[-1] - self._times[0]
        return (len(self._times) - 1) / elapsed if elapsed > 0 else 0.0
