"""TaskDraw: shuffled passes; with `balance_by`, exactly the same number of tasks of each value every step."""

from __future__ import annotations

from collections import Counter
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from algorithm import Task
from lightningrl.rl.config import LightningRLConfig
from lightningrl.rl.loop import LightningRL
from lightningrl.rl.task_draw import TaskDraw
from lightningstore import SqlStore


def tasks_of(counts: dict[str, int]) -> list[Task]:
    return [
        Task(task_id=f"{op}{i}", input={"i": i}, tags={"op": op})
        for op, n in counts.items()
        for i in range(n)
    ]


def test_per_step_rounds_up_to_a_multiple_of_the_slices_and_every_batch_is_exactly_balanced() -> None:
    draw = TaskDraw(tasks_of({"plus": 5, "minus": 3, "times": 7}), 4, balance_by="op", seed=0)

    assert (draw.requested, draw.per_slice, draw.per_step) == (4, 2, 6)
    assert draw.rounding_note == "balance_by='op': tasks_per_step 4 -> 6 (2 of each of 3 values)"
    for _ in range(20):
        batch = draw.next()
        assert len(batch) == 6
        assert Counter(t.tags["op"] for t in batch) == {"plus": 2, "minus": 2, "times": 2}


def test_a_multiple_is_kept_and_without_balance_by_nothing_is_rounded() -> None:
    tasks = tasks_of({"plus": 4, "minus": 4, "times": 4})
    assert TaskDraw(tasks, 6, balance_by="op", seed=0).rounding_note is None
    plain = TaskDraw(tasks, 4, balance_by=None, seed=0)
    assert (plain.per_step, plain.slices, plain.rounding_note) == (4, [""], None)
    assert len(plain.next()) == 4


def test_each_slice_is_drawn_in_whole_shuffled_passes() -> None:
    draw = TaskDraw(tasks_of({"plus": 3, "minus": 2}), 2, balance_by="op", seed=1)
    batches = [draw.next() for _ in range(3)]
    plus = [t.task_id for batch in batches for t in batch if t.tags["op"] == "plus"]
    assert sorted(plus) == ["plus0", "plus1", "plus2"]  # one pass: each once
    minus = [t.task_id for batch in batches for t in batch if t.tags["op"] == "minus"]
    minus += [t.task_id for t in draw.draw("minus", 3)]  # a refill continues the slice's own passes
    assert Counter(minus) == {"minus0": 3, "minus1": 3}  # three whole passes
    with pytest.raises(ValueError, match="no train task is in slice 'divide'"):
        draw.draw("divide", 1)


def test_the_same_seed_draws_the_same_batches() -> None:
    tasks = tasks_of({"plus": 5, "minus": 5})
    first = TaskDraw(tasks, 4, balance_by="op", seed=3)
    second = TaskDraw(tasks, 4, balance_by="op", seed=3)
    assert [[t.task_id for t in first.next()] for _ in range(5)] == [
        [t.task_id for t in second.next()] for _ in range(5)
    ]


def test_bad_per_step_is_refused() -> None:
    with pytest.raises(ValueError, match="per_step must be >= 1, got 0"):
        TaskDraw(tasks_of({"plus": 1}), 0, balance_by=None, seed=0)


async def test_the_loop_records_the_rounded_count_in_its_config(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    try:
        config = LightningRLConfig(tasks_per_step=4, balance_by="op", output_dir=tmp_path / "run")
        out = StringIO()
        rl = LightningRL(store, tasks_of({"a": 2, "b": 2, "c": 2}), config=config, console=Console(file=out))
        assert rl.config.tasks_per_step == 6 and rl.config.summary()["tasks_per_step"] == 6
        assert config.tasks_per_step == 4  # the caller's config is not changed
        assert "tasks_per_step 4 -> 6" in out.getvalue()
    finally:
        await store.close()
