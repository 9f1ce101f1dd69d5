"""assign_credit_to_rollouts: credit for many rollouts at once, with a run's credit settings."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Protocol

from lightningrl.credit.assign import assign_credit
from lightningrl.credit.report import CreditReport
from lightningrl.credit.sequence import TrainingSequence
from lightningstore.data.reward import Reward
from lightningstore.data.span import Span


class CreditSettings(Protocol):
    """The credit fields of a run's config (`LightningRLConfig` has them)."""

    @property
    def agent_names(self) -> Collection[str] | None: ...
    @property
    def gamma(self) -> float: ...
    @property
    def reward_name(self) -> str | None: ...
    @property
    def return_to_judged_calls(self) -> bool: ...


@dataclass(frozen=True)
class RolloutEvidence:
    """What credit assignment reads of one rollout: its latest attempt's spans and its rewards."""

    group_id: str | None
    spans: list[Span]
    rewards: list[Reward]


def assign_credit_to_rollouts(
    rollouts: Iterable[RolloutEvidence], settings: CreditSettings
) -> tuple[list[TrainingSequence], CreditReport]:
    """Every rollout's training sequences, in order, and the sum of their credit reports."""
    sequences: list[TrainingSequence] = []
    report = CreditReport()
    for rollout in rollouts:
        result = assign_credit(
            rollout.spans,
            rollout.rewards,
            agent_names=settings.agent_names,
            gamma=settings.gamma,
            reward_name=settings.reward_name,
            group_id=rollout.group_id,
            return_to_judged_calls=settings.return_to_judged_calls,
        )
        sequences += result.sequences
        report = report + result.report
    return sequences, report
