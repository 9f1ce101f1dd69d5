"""Credit assignment: a rollout's spans and rewards -> training sequences, and their padded batch."""

from __future__ import annotations

from lightningrl.credit.assign import CreditResult, assign_credit
from lightningrl.credit.batch import SequenceBatch, collate
from lightningrl.credit.calls import LlmCall, is_llm_span, llm_calls
from lightningrl.credit.report import CreditReport
from lightningrl.credit.sequence import TrainingSequence

__all__ = [
    "CreditReport",
    "CreditResult",
    "LlmCall",
    "SequenceBatch",
    "TrainingSequence",
    "assign_credit",
    "collate",
    "is_llm_span",
    "llm_calls",
]
