"""Credit assignment: a rollout's spans and rewards -> training sequences, and their padded batch."""

from __future__ import annotations

from lightningrl.credit.assign import CreditResult, assign_credit
from lightningrl.credit.batch import SequenceBatch, collate
from lightningrl.credit.calls import LlmCall, is_llm_span, llm_calls
from lightningrl.credit.report import CreditReport
from lightningrl.credit.rollouts import CreditSettings, RolloutEvidence, assign_credit_to_rollouts
from lightningrl.credit.sequence import TrainingSequence

__all__ = [
    "CreditReport",
    "CreditResult",
    "CreditSettings",
    "LlmCall",
    "RolloutEvidence",
    "SequenceBatch",
    "TrainingSequence",
    "assign_credit",
    "assign_credit_to_rollouts",
    "collate",
    "is_llm_span",
    "llm_calls",
]
