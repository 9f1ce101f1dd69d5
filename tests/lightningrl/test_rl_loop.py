"""A short RL run through the whole stack (store, proxy, inference server, runner, verl) whose reward rises."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from toy_ab import pick_b_agent, publish_warm, success_of, toy_tasks, warm_ab_model

from lightningrl.fitting.local_stack import local_stack
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.continuous import TRAINED_MARK
from lightningrl.rl.loop import LightningRL
from lightningrl.trainer.config import TrainerConfig
from lightningstore import RolloutStatus, SqlStore
from runner import Runner

STEP_LINE = re.compile(r"^step (\d+)/(\d+)  reward (\d\.\d\d)(?:  held-out (\d\.\d\d))?  (\d+\.\d) s$")


@pytest.fixture(scope="module")
def warm_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model that answers a or b at random (the warm-up teaches the format, not the choice)."""
    return warm_ab_model(tmp_path_factory.mktemp("toy"))


@pytest.mark.slow
async def test_reward_rises_and_versions_chain(warm_model: Path, tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    tasks = toy_tasks()
    async with local_stack(store, warm_model, model_name="toy") as urls:
        root = await publish_warm(store, urls.model_v1, warm_model)
        runner = Runner(store, pick_b_agent, workers=8, proxy_url=urls.proxy, show_progress=False)
        runner_task = asyncio.create_task(runner.run())
        config = LightningRLConfig(
            steps=12,
            tasks_per_step=3,
            rollouts_per_task=8,
            val_every=12,
            val_rollouts_per_task=16,
            output_dir=tmp_path / "run",
            trainer=TrainerConfig(lr=3e-3),
        )
        console_output = io.StringIO()  # not a terminal: one plain line per step instead of the bar
        rl = LightningRL(store, tasks, tasks, config, console=Console(file=console_output))
        before = await success_of(store, tasks, root)
        metrics = await rl.run()
        trained_rows = [r for r in metrics.rows if r["step"] > 0]  # step 0: the validation before training
        rows_after_run = len(metrics.rows)

        # continuous mode: rollouts someone else enqueued get trained on once
        outside = await rl.enqueue_tasks(tasks, n=4, resources_id=rl.resources_id, group_prefix="prod/")
        await rl.wait_for(outside, timeout=120)
        previous = rl.version
        continuous = await rl.run_continuous(max_steps=1, min_rollouts=12, poll_interval=0.1, idle_timeout=30)
        runner.stop()
        await asyncio.wait_for(runner_task, timeout=60)

    assert metrics.rows[0]["step"] == 0 and "val/success" in metrics.rows[0]
    after = trained_rows[-1]["val/success"]
    assert 0.2 < before < 0.8, before  # the warm-up did not solve it
    assert after >= min(before + 0.15, 0.9), (before, after)
    first, last = trained_rows[0]["train/reward_mean"], trained_rows[-1]["train/reward_mean"]
    assert last > first, (first, last)

    versions = await store.list_resource_versions("llm")
    assert len(versions) >= 2
    for parent, child in zip(versions, versions[1:], strict=False):
        assert child.parent_id == parent.version_id  # each candidate names its exact parent
    # keep_checkpoints (default 3): the newest three steps' checkpoints stay (the best validated, step
    # 12's, is one of them), older ones are deleted as training goes.
    kept = [Path(v.resource.checkpoint).joinpath("config.json").exists() for v in versions[1:]]
    assert kept == [False] * (len(kept) - 3) + [True] * 3, kept
    assert (await store.get_approved_version("llm")).version_id == root.version_id  # training never approves
    assert (tmp_path / "run" / "metrics.csv").exists() and (tmp_path / "run" / "reward_curve.png").exists()

    # One line per step; a learning-health line (rl/health.py) is printed once, when it first shows.
    said = console_output.getvalue().splitlines()
    assert [line for line in said if line.startswith("checkpoints: ")] == [
        "checkpoints: keeping the newest 3 step checkpoints and the approved and best validated ones "
        "(keep_checkpoints; None keeps every step's)"
    ]
    lines = [line for line in said if not line.startswith(("health: ", "checkpoints: "))]
    assert len(lines) == len(trained_rows), lines
    for line, row in zip(lines, trained_rows, strict=True):
        match = STEP_LINE.match(line)
        assert match, line
        step, total, reward, heldout, seconds = match.groups()
        assert (int(step), int(total)) == (row["step"], 12)
        assert reward == f"{row['train/reward_mean']:.2f}" and seconds == f"{row['step_seconds']:.1f}"
        assert heldout == (f"{row['val/success']:.2f}" if "val/success" in row else None), line

    assert len(continuous.rows) == rows_after_run + 1 and continuous.rows[-1]["step"] == len(trained_rows) + 1
    assert rl.version.parent_id == previous.version_id
    for rollout, _ in outside:
        stored = await store.get_rollout_by_id(rollout.rollout_id)
        assert (
            stored.status == RolloutStatus.SUCCEEDED
            and stored.metadata[TRAINED_MARK] == len(trained_rows) + 1
        )
    await store.close()
