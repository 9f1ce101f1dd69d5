"""A rollout's outcome is its episode reward; a step reward judges one call."""

from __future__ import annotations

from algorithm.base import primary_reward
from lightningstore import Reward


def reward(value: float, *, step: int | None = None, primary: bool = True, name: str = "reward") -> Reward:
    return Reward(
        rollout_id="r1",
        name=name,
        value=value,
        step=step,
        primary=primary,
        reward_id=f"rw{value}{step}",
        create_time=0,
    )


def test_the_episode_reward_wins_over_a_later_step_reward() -> None:
    assert primary_reward([reward(0.0), reward(1.0, step=1)]) == 0.0


def test_the_last_episode_reward_wins_when_an_agent_re_emits() -> None:
    assert primary_reward([reward(0.25), reward(1.0, step=0), reward(0.75)]) == 0.75


def test_a_step_reward_is_the_outcome_only_without_an_episode_reward() -> None:
    assert primary_reward([reward(0.5, step=0), reward(0.25, step=1)]) == 0.25


def test_non_primary_rewards_are_not_the_outcome() -> None:
    assert primary_reward([reward(3.0, primary=False, name="cost")]) is None
    assert primary_reward([]) is None
