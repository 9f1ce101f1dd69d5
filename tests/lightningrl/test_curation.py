"""Pass-rate curation: always / never / mixed counts per slice, the kept tasks, and `lightningrl data probe`."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import pytest
from fit_agents import PROMPTS

from algorithm import Task
from lightningrl.cli import main
from lightningrl.curation import Curation, SliceRow, TaskPasses
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.fitting.stages import algorithm_sequence
from lightningstore import SqlStore


def task(name: str, op: str) -> Task:
    return Task(task_id=name, input={"q": name}, tags={"op": op})


def test_counts_per_slice_and_only_mixed_tasks_are_kept() -> None:
    passes = (
        TaskPasses(task("p1", "plus"), 4, 4),
        TaskPasses(task("p2", "plus"), 1, 4),
        TaskPasses(task("p3", "plus"), 0, 4),
        TaskPasses(task("m1", "minus"), 3, 4),
        TaskPasses(task("m2", "minus"), 0, 4),
    )
    curation = Curation(passes, slice_by="op")

    assert curation.rows() == [
        SliceRow("op=minus", 2, always=0, never=1, mixed=1, mean_pass_rate=0.375),
        SliceRow("op=plus", 3, always=1, never=1, mixed=1, mean_pass_rate=(1 + 0.25) / 3),
        SliceRow("all", 5, always=1, never=2, mixed=2, mean_pass_rate=(1 + 0.25 + 0.75) / 5),
    ]
    assert [t.task_id for t in curation.kept] == ["p2", "m1"] and not curation.kept_all
    assert [t.task_id for t in curation.of_kind("never")] == ["p3", "m2"]
    assert (
        curation.summary() == "kept 2 of 5 tasks (solved sometimes); dropped 1 always solved, 2 never solved"
    )
    lines = curation.table().splitlines()
    assert lines[0].split("  ")[0].strip() == "slice" and "mean pass rate" in lines[0]
    assert lines[1].split() == ["op=minus", "2", "0", "1", "1", "0.375"]
    assert len({len(line) for line in lines}) == 1  # aligned


def test_no_mixed_task_keeps_all_and_says_so() -> None:
    curation = Curation((TaskPasses(task("a", "x"), 2, 2), TaskPasses(task("b", "x"), 0, 2)))
    assert curation.kept_all and [t.task_id for t in curation.kept] == ["a", "b"]
    assert curation.summary() == "no task is mixed (1 always solved, 1 never solved): keeping all 2 tasks"
    assert [r.slice for r in curation.rows()] == ["all"]  # no slice_by: one row


def test_bad_counts_and_probe_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="task 'a': passes must be in \\[0, tries\\].*passes=3, tries=2"):
        TaskPasses(task("a", "x"), 3, 2)
    with pytest.raises(ValueError, match="probe must be an integer >= 0 \\(0: no probe\\), got -1"):
        algorithm_sequence("rl", probe=-1)
    assert algorithm_sequence([], probe=2) == ()  # probe only
    assert algorithm_sequence([], evaluate=1) == ()  # evaluate only
    with pytest.raises(ValueError, match="evaluate must be an integer >= 0 \\(0: no evaluate\\), got True"):
        algorithm_sequence("rl", evaluate=True)
    with pytest.raises(ValueError, match="algorithm must name at least one"):
        algorithm_sequence([])


AGENT = textwrap.dedent(
    '''
    """Passes by the task's kind: easy always, hard never, mixed every other try (per task)."""
    from collections import Counter

    from runner import rollout

    TRIES = Counter()


    @rollout
    async def agent(task: dict, resources) -> float:
        TRIES[task["prompt"]] += 1
        if task["kind"] == "mixed":
            return float(TRIES[task["prompt"]] % 2)
        return 1.0 if task["kind"] == "easy" else 0.0
    '''
)


@pytest.mark.slow
def test_data_probe_writes_the_mixed_tasks_and_prints_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = build_tiny_model(
        tmp_path / "model", seed=0, tokenizer_kind="word", extra_text=PROMPTS, hidden_size=32, num_layers=1
    )
    (tmp_path / "agent.py").write_text(AGENT)
    rows = [{"prompt": f"{kind} {i}", "kind": kind} for kind in ("easy", "hard", "mixed") for i in range(2)]
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "kept.jsonl"
    args = ["data", "probe", "--agent", f"{tmp_path / 'agent.py'}:agent", "--train", str(train)]
    args += ["--model", str(model), "--out", str(out), "-k", "4", "--slice-by", "kind", "--workers", "4"]
    args += ["--runner-processes", "1", "--output-dir", str(tmp_path / "run"), "--engine", "ours"]

    assert main(args) == 0

    assert [json.loads(line) for line in out.read_text().splitlines()] == rows[4:]  # the two mixed, as given
    printed = capsys.readouterr().out
    table = {
        line.split()[0]: line.split()[1:]
        for line in printed.splitlines()
        if line.startswith(("kind=", "all "))
    }
    assert table == {
        "kind=easy": ["2", "2", "0", "0", "1.000"],
        "kind=hard": ["2", "0", "2", "0", "0.000"],
        "kind=mixed": ["2", "0", "0", "2", "0.500"],
        "all": ["6", "2", "2", "2", "0.500"],
    }
    assert "kept 2 of 6 tasks (solved sometimes); dropped 2 always solved, 2 never solved" in printed
    assert "wrote 2 tasks to" in printed
    rollouts, versions = asyncio.run(_read(tmp_path / "run" / "store.db"))
    assert len(rollouts) == 6 * 4 and {r.mode for r in rollouts} == {"train"}
    assert all(r.group_id.startswith("probe/") for r in rollouts)
    assert len(versions) == 1  # probed, never trained


async def _read(db: Path) -> tuple[list, list]:
    store = SqlStore(db)
    try:
        return await store.query_rollouts(), await store.list_resource_versions("llm")
    finally:
        await store.close()
