"""Token accounting: train-inference mismatch, retokenization drift and prefix continuity, per step.

What each figure means: docs/token-accounting.md. The trainer measures the mismatch (it holds the
recomputed log-probs); the loop counts drift and continuity from the spans it trains on.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from lightningrl.accounting.drift import DriftCounts, retokenization_drift
from lightningrl.accounting.mismatch import logprob_mismatch
from lightningrl.credit.report import CreditReport
from lightningstore.data.span import Span

__all__ = ["DriftCounts", "logprob_mismatch", "retokenization_drift", "token_row", "tokenizer_of"]


@lru_cache(maxsize=4)
def tokenizer_of(checkpoint: str) -> Any:
    """The tokenizer of a checkpoint (an adapter's base's), loaded once per process."""
    from transformers import AutoTokenizer

    from lightningrl.models.adapter import base_of
    from lightningrl.quiet import quiet_third_party

    with quiet_third_party():
        return AutoTokenizer.from_pretrained(base_of(Path(checkpoint)))


def token_row(spans: Iterable[Span], report: CreditReport, checkpoint: str | None) -> dict[str, float]:
    """A step's `tokens/` metrics: drift shares over `spans` (needs the checkpoint's tokenizer) and
    prefix continuity from the credit report."""
    row: dict[str, float] = {}
    if checkpoint and Path(checkpoint).is_dir():
        counts = retokenization_drift(spans, tokenizer_of(str(checkpoint)))
        row.update({f"tokens/{k}": v for k, v in counts.shares().items()})
    if report.multi_call_rollouts:
        row["tokens/prefix_continuity"] = report.multi_call_rollouts_merged / report.multi_call_rollouts
    return row
