"""A rollout's outcome as the trainer reads it, for the pages that show one number per rollout."""

from __future__ import annotations

from collections.abc import Sequence

from lightningstore.data.reward import Reward


def primary_reward(rewards: Sequence[Reward]) -> float | None:
    """The last primary episode reward, else the last primary step reward (as `algorithm.primary_reward`)."""
    chosen = [r for r in rewards if r.primary]
    pick = [r for r in chosen if r.judges_episode] or chosen
    return pick[-1].value if pick else None
