"""Async rollouts: step k+1's rollouts run while step k trains, on the version step k trains from; each
trained transition records the version that sampled it; stale ones are dropped and counted."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from rich.console import Console
from toy_ab import pick_b_agent, publish_warm, success_of, toy_tasks, warm_ab_model

from lightningrl.fitting.local_stack import local_stack
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.loop import LightningRL
from lightningrl.trainer.config import TrainerConfig
from lightningstore import SqlStore
from runner import Runner

LEARN_STEPS = 12
"""As many steps as the synchronous loop's test takes for the same bar (async learns a step later)."""
DROP_STEPS = 6


@pytest.fixture(scope="module")
def warm_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return warm_ab_model(tmp_path_factory.mktemp("toy"))


async def _train(
    warm_model: Path, root: Path, steps: int, **config: object
) -> tuple[SqlStore, LightningRL, float]:
    """Train the toy task with async rollouts; the store, the loop and held-out success before training."""
    store = SqlStore(root / "store.db")
    tasks = toy_tasks()
    async with local_stack(store, warm_model, model_name="toy") as urls:
        start = await publish_warm(store, urls.model_v1, warm_model)
        runner = Runner(store, pick_b_agent, workers=8, proxy_url=urls.proxy, show_progress=False)
        runner_task = asyncio.create_task(runner.run())
        before = await success_of(store, tasks, start)
        rl = LightningRL(
            store,
            tasks,
            tasks,
            LightningRLConfig(
                steps=steps,
                tasks_per_step=3,
                rollouts_per_task=8,
                val_every=steps,
                val_rollouts_per_task=16,
                output_dir=root / "run",
                trainer=TrainerConfig(lr=3e-3),
                async_rollouts=True,
                **config,
            ),
            console=Console(file=io.StringIO()),
        )
        await rl.run()
        runner.stop()
        await asyncio.wait_for(runner_task, timeout=60)
    return store, rl, before


@pytest.mark.slow
async def test_async_rollouts_train_one_version_behind_and_learn(warm_model: Path, tmp_path: Path) -> None:
    store, rl, before = await _train(warm_model, tmp_path, LEARN_STEPS)
    rows = [r for r in rl.metrics.rows if r["step"] > 0]
    assert len(rows) == LEARN_STEPS
    versions = await store.list_resource_versions("llm")
    by_id = {v.version_id: v for v in versions}
    # A step whose groups all had equal rewards trains nothing and publishes nothing (late in this
    # quick-learning run that happens); every other step publishes one candidate.
    updated = [r for r in rows if not r.get("update/skipped")]
    assert all(r["update/reason"] == "every group had equal rewards" for r in rows if r.get("update/skipped"))
    assert len(updated) >= LEARN_STEPS - 3, [r.get("update/reason") for r in rows]
    assert len(versions) == len(updated) + 1  # the start and one candidate per step that trained
    for previous, row in zip([None, *rows], rows, strict=False):
        assert row["async/stale_dropped"] == 0 and row["async/unversioned_dropped"] == 0
        # step 1 samples the version it trains; a later step's batch ran while the previous step
        # trained, so it is one version behind unless that step published nothing
        behind = 0 if previous is None or previous.get("update/skipped") else 1
        assert row["async/staleness"] == behind, row
        if not row.get("update/skipped"):
            assert by_id[row["update/version_id"]].parent_id == row["async/trained_from"]
    for row, following in zip(rows, rows[1:], strict=False):
        if row.get("update/skipped"):
            continue
        # step k+1's rollouts were enqueued before step k's candidate existed
        assert row["async/next_enqueued_at"] < by_id[row["update/version_id"]].create_time
        assert following["async/trained_from"] == row["update/version_id"]
    after = rows[-1]["val/success"]
    assert after >= min(before + 0.15, 0.9), (before, after)
    await store.close()


@pytest.mark.slow
async def test_async_rollouts_older_than_max_staleness_are_dropped(warm_model: Path, tmp_path: Path) -> None:
    store, rl, _ = await _train(warm_model, tmp_path, DROP_STEPS, async_max_staleness=0)
    rows = [r for r in rl.metrics.rows if r["step"] > 0]
    # step 1 trains on the start version's samples; step 2's batch was enqueued while step 1 trained, on the
    # start version: one behind, all dropped, nothing trained; so step 3's batch (enqueued during step 2)
    # is on the version step 3 trains from, and so on: every other step trains
    for row in rows:
        if row["step"] % 2:
            assert row["async/stale_dropped"] == 0 and "update/skipped" not in row, row
        else:
            assert row["async/stale_dropped"] == row["train/rollouts"] == 24, row
            assert row["update/skipped"] == 1, row
    assert len(await store.list_resource_versions("llm")) == 1 + DROP_STEPS // 2
    await store.close()
