"""Dynamic sampling: uninformative groups are replaced by fresh tasks' groups (same slice) in extra rounds;
slices that rarely succeed get larger groups."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter
from collections.abc import Sequence
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from algorithm import RolloutOutcome, Task
from lightningrl.rl.batch_fill import BatchFill, SliceRates, is_informative, rollout_signal
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.loop import LightningRL
from lightningrl.rl.task_draw import TaskDraw
from lightningstore import Reward, Rollout, RolloutConfig, RolloutMode, RolloutStatus, SqlStore
from runner import Runner, rollout


def outcome(
    task: Task,
    group: str,
    k: int,
    rewards: list[float],
    *,
    status: RolloutStatus = RolloutStatus.SUCCEEDED,
    steps: Sequence[float] = (),
    name: str = "reward",
) -> RolloutOutcome:
    rollout_id = f"{group}.{k}"
    stored = [
        Reward(rollout_id=rollout_id, value=v, name=name, reward_id=f"{rollout_id}/e{i}", create_time=0.0)
        for i, v in enumerate(rewards)
    ]
    stored += [
        Reward(rollout_id=rollout_id, value=v, step=i, reward_id=f"{rollout_id}/s{i}", create_time=0.0)
        for i, v in enumerate(steps)
    ]
    row = Rollout(
        rollout_id=rollout_id,
        input=task.input,
        mode=RolloutMode.TRAIN,
        config=RolloutConfig(),
        status=status,
        group_id=group,
        enqueue_time=0.0,
    )
    return RolloutOutcome(rollout=row, task=task, reward=rewards[-1] if rewards else None, rewards=stored)


def group(task: Task, prefix: str, values: list[float | None]) -> list[RolloutOutcome]:
    """A group of `task` whose k-th rollout has reward values[k] (None: the rollout failed)."""
    return [
        outcome(
            task,
            f"{prefix}{task.task_id}",
            k,
            [v or 0.0],
            status=RolloutStatus.FAILED if v is None else RolloutStatus.SUCCEEDED,
        )
        for k, v in enumerate(values)
    ]


TASKS = [
    Task(task_id=f"{op}{i}", input={"i": i}, tags={"op": op}) for op in ("plus", "minus") for i in range(3)
]


def test_a_group_is_informative_when_two_succeeded_rollouts_differ() -> None:
    task = TASKS[0]
    assert is_informative(group(task, "s/", [1.0, 0.0, 1.0]))
    assert not is_informative(group(task, "s/", [1.0, 1.0, 1.0]))
    assert not is_informative(group(task, "s/", [0.0, 0.0]))
    # A failed rollout is never trained on: it is no signal, not reward 0.
    assert not is_informative(group(task, "s/", [1.0, None, None]))
    assert is_informative(group(task, "s/", [1.0, None, 0.0]))
    assert rollout_signal(group(task, "s/", [None])[0]) is None
    # Step rewards tell rollouts apart too; a diagnostic reward (not selected) does not.
    same_outcome = [outcome(task, "g", 0, [1.0], steps=[0.5]), outcome(task, "g", 1, [1.0], steps=[0.0])]
    assert is_informative(same_outcome)
    named = [outcome(task, "g", 0, [1.0], name="acc"), outcome(task, "g", 1, [0.0], name="acc")]
    assert is_informative(named, reward_name="acc") and not is_informative(named, reward_name="other")


def test_refills_come_from_the_slices_short_of_informative_groups_and_stop_after_the_rounds() -> None:
    draw = TaskDraw(TASKS, 4, balance_by="op", seed=0)
    fill = BatchFill(draw, 3, max_fill_rounds=2, hard_slice_factor=1)
    first = draw.next()
    outcomes = [
        o
        for t in first
        for o in group(
            t, "s1/", [1.0, 0.0, 0.0] if t.task_id in (first[0].task_id, first[1].task_id) else [1.0] * 3
        )
    ]
    step = fill.begin(outcomes)
    # first[0] and first[1] are one plus and one minus (interleaved): each slice has 1 of its 2.
    assert step.shortfall() == {"plus": 1, "minus": 1}
    refills = step.refill_tasks()
    assert sorted(t.tags["op"] for t in refills) == ["minus", "plus"]
    plus_refill = next(t for t in refills if t.tags["op"] == "plus")
    step.add_round(
        [o for t in refills for o in group(t, "s1/r1/", [1.0, 0.0, 1.0] if t is plus_refill else [0.0] * 3)]
    )
    assert step.shortfall() == {"minus": 1}
    step.add_round([o for t in step.refill_tasks() for o in group(t, "s1/r2/", [0.0] * 3)])
    assert step.shortfall() == {}  # two extra rounds ran: train on what there is

    row = step.metrics()
    assert row["sample/rounds"] == 3 and row["sample/rollouts"] == 3 * (4 + 2 + 1)
    assert row["sample/informative_groups"] == 3 and row["sample/uninformative_groups"] == 4
    assert row["sample/informative_share"] == pytest.approx(3 / 7)
    assert row["sample/informative_share[op=plus]"] == pytest.approx(2 / 3)
    assert row["sample/informative_share[op=minus]"] == pytest.approx(1 / 4)
    # Three informative groups, padded with the earliest uninformative one to tasks_per_step (4).
    trained = step.train_outcomes()
    groups = list(dict.fromkeys(o.rollout.group_id for o in trained))
    assert len(groups) == 4 and groups[3] == "s1/r1/" + plus_refill.task_id
    assert "s1/" + first[2].task_id in groups and "s1/" + first[3].task_id not in groups
    assert step.first_round == outcomes


def test_a_full_first_round_needs_no_refill_and_trains_on_all_of_it() -> None:
    draw = TaskDraw(TASKS, 2, balance_by=None, seed=0)
    fill = BatchFill(draw, 2)
    outcomes = [o for t in draw.next() for o in group(t, "s1/", [1.0, 0.0])]
    step = fill.begin(outcomes)
    assert step.refill_tasks() == [] and step.train_outcomes() == outcomes
    assert step.metrics()["sample/informative_share"] == 1.0
    assert "sample/informative_share[op=plus]" not in step.metrics()  # no balance_by: no slices


def test_a_task_drawn_twice_in_a_round_counts_as_two_groups() -> None:
    one = [Task(task_id="only", input={}, tags={"op": "plus"})]
    draw = TaskDraw(one, 2, balance_by=None, seed=0)
    assert [t.task_id for t in draw.next()] == ["only", "only"]  # one group id: s1/only, 4 rollouts
    step = BatchFill(draw, 2).begin(group(one[0], "s1/", [1.0, 0.0, 0.0, 1.0]))
    assert step.refill_tasks() == []  # two informative draws: the step is full
    assert step.metrics()["sample/informative_groups"] == 2 and step.metrics()["sample/rounds"] == 1


def test_off_or_async_measures_without_refilling() -> None:
    draw = TaskDraw(TASKS, 2, balance_by=None, seed=0)
    outcomes = [o for t in draw.next() for o in group(t, "s1/", [1.0, 1.0])]
    for step in (
        BatchFill(draw, 2, max_fill_rounds=0).begin(outcomes),
        BatchFill(draw, 2).begin(outcomes, refill=False),
    ):
        assert step.refill_tasks() == [] and step.train_outcomes() == outcomes
        assert step.metrics()["sample/uninformative_groups"] == 2


def test_a_slice_that_rarely_succeeds_gets_larger_groups_until_it_recovers() -> None:
    draw = TaskDraw(TASKS, 2, balance_by="op", seed=0)
    fill = BatchFill(draw, 4, hard_slice_factor=2, success_threshold=1.0)
    assert fill.group_size("plus") == 4  # nothing seen yet
    plus, minus = TASKS[0], TASKS[3]
    fill.begin(group(plus, "s1/", [0.0] * 4) + group(minus, "s1/", [1.0, 0.0, 0.0, 0.0]))
    # plus: 0/4 < 1/4 -> doubled; minus: exactly 1/4 is not below -> as configured.
    assert (fill.group_size("plus"), fill.group_size("minus")) == (8, 4)
    assert fill.by_group_size([plus, minus, TASKS[1]]) == [(4, [minus]), (8, [plus, TASKS[1]])]
    fill.begin(group(plus, "s2/", [1.0] * 8) + group(minus, "s2/", [1.0] * 4))
    assert fill.group_size("plus") == 4  # 0.7 * 0 + 0.3 * 1 = 0.3: recovered
    assert BatchFill(draw, 4, hard_slice_factor=1).group_size("plus") == 4


def test_a_graded_reward_below_the_threshold_gets_no_larger_groups() -> None:
    draw = TaskDraw(TASKS, 2, balance_by="op", seed=0)
    fill = BatchFill(draw, 4, success_threshold=1.0)
    fill.begin(group(TASKS[0], "s1/", [0.1, 0.2, 0.3, 0.4]))  # no success, but the rollouts differ
    assert fill.rates.rates["plus"] == 0.0 and fill.group_size("plus") == 4
    fill.begin(group(TASKS[0], "s2/", [0.2] * 4))  # now a group agreed on failure
    assert fill.group_size("plus") == 8


def test_running_rate_and_bad_settings() -> None:
    rates = SliceRates(decay=0.5)
    rates.observe("a", 1, 2)
    rates.observe("a", 0, 0)  # nothing rolled out: unchanged
    rates.observe("a", 1, 1)
    assert rates.rates == {"a": 0.75}
    draw = TaskDraw(TASKS, 2, balance_by=None, seed=0)
    with pytest.raises(ValueError, match="max_fill_rounds must be >= 0, got -1"):
        BatchFill(draw, 2, max_fill_rounds=-1)
    with pytest.raises(ValueError, match="hard_slice_factor must be >= 1, got 0"):
        BatchFill(draw, 2, hard_slice_factor=0)
    with pytest.raises(ValueError, match="max_fill_rounds must be >= 0, got -2"):
        LightningRLConfig(max_fill_rounds=-2)


# ---- through the loop: a real store and runner, no model ------------------------------------------

_CALLS: Counter[str] = Counter()


@rollout
async def kind_agent(task: dict, resources) -> float:
    """ "solved" tasks always succeed, "never" tasks never do, "mixed" tasks alternate (per task)."""
    if task["kind"] == "mixed":
        _CALLS[task["id"]] += 1
        return float(_CALLS[task["id"]] % 2)
    return 1.0 if task["kind"] == "solved" else 0.0


async def test_the_loop_refills_uninformative_groups_from_their_slice(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    kinds = ("mixed", "never", "solved")
    tasks = [
        Task(task_id=f"{k}{i}", input={"kind": k, "id": f"{k}{i}"}, tags={"kind": k})
        for k in kinds
        for i in range(2)
    ]
    config = LightningRLConfig(
        tasks_per_step=2,
        rollouts_per_task=2,
        balance_by="kind",
        output_dir=tmp_path / "run",
        show_progress=False,
    )
    runner = Runner(store, kind_agent, workers=4, poll_interval=0.02, show_progress=False)
    running = asyncio.create_task(runner.run())
    try:
        rl = LightningRL(store, tasks, config=config, console=Console(file=StringIO()))
        started = time.perf_counter()
        fill = await rl._fill_batch(1, await (await rl._start_batch(1)))
        assert time.perf_counter() - started < 60
        row = fill.metrics()
        # 3 slices: tasks_per_step 2 -> 3. Only "mixed" is ever informative: two extra rounds refill the others.
        assert row["sample/rounds"] == 3
        assert (row["sample/informative_groups"], row["sample/uninformative_groups"]) == (1, 6)
        assert (
            row["sample/informative_share[kind=mixed]"] == 1.0
            and row["sample/informative_share[kind=never]"] == 0.0
        )
        # "never" succeeded 0 of 2 after round 0 (< 1/2): its refills roll out 4, the others 2.
        sizes = Counter((o.rollout.group_id, o.task.tags["kind"]) for o in fill.rounds[1])
        assert sorted((kind, n) for (_, kind), n in sizes.items()) == [("never", 4), ("solved", 2)]
        assert row["sample/rollouts"] == 6 + 6 + 6
        stored = await store.query_rollouts()
        assert len(stored) == 18
        assert {r.group_id.split("/")[1] for r in stored if r.group_id.count("/") == 2} == {"r1", "r2"}
        trained = {o.rollout.group_id for o in fill.train_outcomes()}
        assert len(trained) == 3 and all(g.count("/") == 1 for g in trained)  # round 0's: padded

        off_config = dataclasses.replace(config, dynamic_sampling=False)
        off = LightningRL(store, tasks, config=off_config, console=Console(file=StringIO()))
        measured = await off._fill_batch(2, await (await off._start_batch(2)))
        assert (
            measured.metrics()["sample/rounds"] == 1
            and measured.metrics()["sample/uninformative_groups"] == 2
        )
    finally:
        runner.stop()
        await asyncio.wait_for(running, timeout=30)
        await store.close()
