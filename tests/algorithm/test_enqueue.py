"""Algorithm.enqueue_tasks: n rollouts per task in one group; stable ids when asked (reproducible runs)."""

from __future__ import annotations

from pathlib import Path

from algorithm import Task
from algorithm.base import Algorithm, stable_rollout_id
from lightningstore import SqlStore


class Enqueuer(Algorithm):
    async def run(self) -> None:
        return None


async def test_stable_ids_name_rollouts_by_prefix_position_and_task(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    try:
        tasks = [
            Task(task_id="a", input={"x": 1}),
            Task(task_id="b", input={"x": 2}),
            Task(task_id="a", input={"x": 1}),
        ]
        stable = await Enqueuer(store, stable_rollout_ids=True).enqueue_tasks(tasks, n=2, group_prefix="s1/")
        ids = [r.rollout_id for r, _ in stable]
        assert ids == [
            stable_rollout_id("s1/", p, k, t.task_id) for p, t in enumerate(tasks) for k in range(2)
        ]
        assert len(set(ids)) == 6  # a task drawn twice still gets its own rollouts
        assert [r.group_id for r, _ in stable] == ["s1/a", "s1/a", "s1/b", "s1/b", "s1/a", "s1/a"]
        assert all(i.startswith("s1/") for i in ids)

        random_ids = await Enqueuer(store).enqueue_tasks(tasks, n=2, group_prefix="s1/")
        assert not set(ids) & {r.rollout_id for r, _ in random_ids}
        assert len(await store.query_rollouts()) == 12
    finally:
        await store.close()
