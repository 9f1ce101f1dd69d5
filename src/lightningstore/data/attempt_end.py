"""Checks for `finish_attempt`, shared by the SQL store and the HTTP client: an ending status, rewards of the attempt."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from lightningstore.data.reward import RewardIn
from lightningstore.data.status import AttemptStatus
from lightningstore.errors import InvalidInputError


def ending_status(status: AttemptStatus | str) -> AttemptStatus:
    """`status` as an AttemptStatus that ends an attempt (succeeded, failed, timeout)."""
    try:
        parsed = AttemptStatus(status)
    except ValueError:
        raise InvalidInputError("status", f"unknown attempt status {status!r}") from None
    if not parsed.terminal:
        endings = ", ".join(s.value for s in AttemptStatus if s.terminal)
        raise InvalidInputError("status", f"must end the attempt ({endings}), got {parsed.value!r}")
    return parsed


def owned_rewards(rewards: Sequence[RewardIn], rollout_id: str, attempt_id: str) -> list[RewardIn]:
    """The rewards checked to belong to this attempt (a missing attempt_id is filled in) and each given
    a `reward_id`, so that a repeated request stores them once."""
    owned: list[RewardIn] = []
    for reward in rewards:
        reward = reward if isinstance(reward, RewardIn) else RewardIn.model_validate(reward)
        if reward.rollout_id != rollout_id or reward.attempt_id not in (None, attempt_id):
            raise InvalidInputError(
                "rewards",
                f"reward {reward.name!r} belongs to attempt {reward.attempt_id!r} of rollout "
                f"{reward.rollout_id!r}, not to attempt {attempt_id!r} of rollout {rollout_id!r}",
            )
        update: dict[str, str] = {}
        if reward.attempt_id is None:
            update["attempt_id"] = attempt_id
        if reward.reward_id is None:
            update["reward_id"] = f"rw-{uuid.uuid4().hex}"
        owned.append(reward.model_copy(update=update) if update else reward)
    return owned
