"""Algorithm: what every algorithm does through the store — enqueue, wait, read outcomes, publish."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from algorithm.task import Task
from lightningstore import (
    LightningStore,
    Resource,
    ResourceSet,
    ResourceVersion,
    Reward,
    Rollout,
    RolloutConfig,
    RolloutMode,
    RolloutRequest,
    RolloutStatus,
    rewards_of_rollouts,
)


@dataclass
class RolloutOutcome:
    """A finished rollout with its primary reward (None when the agent reported none)."""

    rollout: Rollout
    task: Task
    reward: float | None
    rewards: list[Reward] = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return self.rollout.status == RolloutStatus.SUCCEEDED


def stable_rollout_id(group_prefix: str, position: int, k: int, task_id: str) -> str:
    """`{prefix}{position}.{k}-{hash of the task id}`: the same call of `enqueue_tasks` names the same rollouts."""
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:12]
    return f"{group_prefix[:150]}{position}.{k}-{digest}"


class Algorithm(ABC):
    """An algorithm drives agents only through the store: it never talks to a runner directly."""

    name = "algorithm"

    def __init__(
        self,
        store: LightningStore,
        *,
        rollout_config: RolloutConfig | None = None,
        stable_rollout_ids: bool = False,
    ) -> None:
        self.store = store
        self.rollout_config = rollout_config or RolloutConfig()
        self.stable_rollout_ids = stable_rollout_ids
        """Name rollouts by group prefix, position and task (not at random): reproducible runs."""

    @abstractmethod
    async def run(self) -> Any:
        """Run the algorithm to completion."""

    async def enqueue_tasks(
        self,
        tasks: Sequence[Task],
        *,
        n: int = 1,
        mode: RolloutMode | str = RolloutMode.TRAIN,
        resources_id: str | None = None,
        group_prefix: str = "",
    ) -> list[tuple[Rollout, Task]]:
        """Enqueue `n` rollouts of every task in one transaction; each task's n rollouts share a group."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        requests: list[RolloutRequest] = []
        owners: list[Task] = []
        for position, task in enumerate(tasks):
            for k in range(n):
                requests.append(
                    RolloutRequest.of(
                        task.input,
                        mode=mode,
                        resources_id=resources_id,
                        config=self.rollout_config,
                        metadata={"task_id": task.task_id, "tags": task.tags, "algorithm": self.name},
                        group_id=f"{group_prefix}{task.task_id}",
                        rollout_id=stable_rollout_id(group_prefix, position, k, task.task_id)
                        if self.stable_rollout_ids
                        else None,
                    )
                )
                owners.append(task)
        rollouts = await self.store.enqueue_many_rollouts(requests)
        return list(zip(rollouts, owners, strict=True))

    async def wait_for(
        self, enqueued: Sequence[tuple[Rollout, Task]], *, timeout: float
    ) -> list[RolloutOutcome]:
        """Wait until every rollout is terminal (TimeoutError naming how many are not), then read their
        rewards in one batch."""
        ids = [r.rollout_id for r, _ in enqueued]
        done = await self.store.wait_for_rollouts(ids, timeout=timeout)
        if len(done) < len(ids):
            raise TimeoutError(
                f"{len(ids) - len(done)} of {len(ids)} rollouts unfinished after {timeout}s "
                "(is a runner attached to the store?)"
            )
        by_id = {r.rollout_id: r for r in done}
        rewards = await rewards_of_rollouts(self.store, ids)
        return [
            RolloutOutcome(
                rollout=by_id[rollout.rollout_id],
                task=task,
                reward=primary_reward(rewards[rollout.rollout_id]),
                rewards=rewards[rollout.rollout_id],
            )
            for rollout, task in enqueued
        ]

    async def publish(
        self,
        name: str,
        resource: Resource,
        *,
        parent_id: str | None,
        artifact: str | None = None,
        metadata: dict[str, Any] | None = None,
        others: dict[str, str] | None = None,
    ) -> tuple[ResourceVersion, ResourceSet]:
        """Publish a candidate version (moves `latest`, never `approved`) and a resource set that binds it
        with the given other versions (name -> version id)."""
        version = await self.store.add_resource_version(
            name, resource, parent_id=parent_id, created_by=self.name, artifact=artifact, metadata=metadata
        )
        resource_set = await self.store.add_resource_set({**(others or {}), name: version.version_id})
        return version, resource_set


def primary_reward(rewards: Sequence[Reward]) -> float | None:
    """The rollout's outcome: its last primary reward judging the whole episode (agents may re-emit);
    a primary STEP reward judges one call, so it counts only when no episode reward exists. None
    when there is none."""
    return last_reward(rewards, lambda r: r.primary)


def last_reward(rewards: Sequence[Reward], selected: Callable[[Reward], bool]) -> float | None:
    """The last selected episode reward, else the last selected step reward, else None."""
    chosen = [r for r in rewards if selected(r)]
    episode = [r for r in chosen if r.judges_episode]
    pick = episode or chosen
    return pick[-1].value if pick else None
