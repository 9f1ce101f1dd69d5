"""LightningRLConfig(deterministic=True): stable rollout ids, and no correction fed by float noise."""

from __future__ import annotations

from pathlib import Path

from algorithm import Task
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.loop import LightningRL
from lightningstore import SqlStore


async def test_deterministic_names_rollouts_and_trains_without_the_rollout_correction(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    try:
        tasks = [Task(task_id="t", input={"q": 1})]
        plain = LightningRL(store, tasks, config=LightningRLConfig(output_dir=tmp_path / "a"))
        exact = LightningRL(
            store, tasks, config=LightningRLConfig(output_dir=tmp_path / "b", deterministic=True)
        )
        assert not plain.stable_rollout_ids and exact.stable_rollout_ids
        assert plain.config.effective_trainer().loss.rollout_is_threshold == 2.0
        assert exact.config.effective_trainer().loss.rollout_is_threshold is None
        # nothing else changes
        assert exact.config.effective_trainer().lr == plain.config.effective_trainer().lr
        enqueued = await exact.enqueue_tasks(tasks, n=2, group_prefix="s1/")
        again = await exact.enqueue_tasks(tasks, n=2, group_prefix="s1/")  # same call: same rollouts
        assert [r.rollout_id for r, _ in enqueued] == [r.rollout_id for r, _ in again]
        assert len(await store.query_rollouts()) == 2
    finally:
        await store.close()
