"""The evaluator's score of a rollout, and means per task."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from algorithm.base import last_reward
from lightningrl.release.selection import task_id_of
from lightningstore import LightningStore, Reward, Rollout, RolloutStatus, rewards_of_rollouts


def score_of(rollout: Rollout, rewards: Sequence[Reward], reward_name: str) -> float | None:
    """The last reward named `reward_name` (the primary one for "reward"); 0 for a failed rollout without
    one; None when a finished rollout has none (missing evidence)."""
    score = last_reward(rewards, lambda r: r.primary if reward_name == "reward" else r.name == reward_name)
    if score is not None:
        return score
    return 0.0 if rollout.status != RolloutStatus.SUCCEEDED else None


async def task_means(
    store: LightningStore, rollouts: Sequence[Rollout], reward_name: str
) -> tuple[dict[str, float], int]:
    """Mean score per task id, and how many rollouts had no score (their rewards read in batches)."""
    rewards = await rewards_of_rollouts(store, [r.rollout_id for r in rollouts])
    scores: dict[str, list[float]] = defaultdict(list)
    missing = 0
    for rollout in rollouts:
        score = score_of(rollout, rewards[rollout.rollout_id], reward_name)
        if score is None:
            missing += 1
        else:
            scores[task_id_of(rollout)].append(score)
    return {task: sum(v) / len(v) for task, v in scores.items()}, missing
