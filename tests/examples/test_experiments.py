"""examples/experiments.py: one short calc run end to end gives the table row, its log and the PNG."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO_ROOT, run_experiments


def test_one_run_of_the_calc_demo_makes_the_table_and_the_curve(calc_experiment: Path) -> None:
    out = calc_experiment
    table = (out / "table.md").read_text().splitlines()
    assert table[0].startswith("| task | framework | model |") and len(table) == 3
    row = [cell.strip() for cell in table[2].strip("|").split("|")]
    assert row[:4] == ["calculator tools", "plain openai client", row[2], "1"] and row[2].endswith("M")
    assert row[7].count("→") == 3 and "op=plus" in row[7]  # held-out by slice, before -> after
    assert row[8] == "1"  # steps
    assert "held-out success: before" in (out / "calc-seed0.log").read_text()
    assert (out / "calc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "calc" / "seed0" / "metrics.csv").exists()

    # A stopped invocation goes on with --resume: the finished run is reused, not run again.
    log = out / "calc-seed0.log"
    before = log.stat().st_mtime_ns
    again = run_experiments(out, "--resume")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert log.stat().st_mtime_ns == before
    assert (out / "table.md").read_text().splitlines()[2] == table[2]
    # ... and one made with another command line is refused, by name.
    refused = run_experiments(out, "--lr", "1", "--resume")
    assert refused.returncode == 1 and "--resume: calc-seed0.log was run with command" in refused.stderr
    assert log.stat().st_mtime_ns == before


def test_an_unknown_demo_is_refused_by_name() -> None:
    done = subprocess.run(
        [sys.executable, "examples/experiments.py", "--only", "calc,chess"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "unknown demo(s) ['chess']" in done.stderr


def test_only_runs_the_named_demos_in_the_order_given() -> None:
    sys.path.insert(0, str(REPO_ROOT / "examples"))
    from experiments import EXPERIMENTS, chosen_experiments

    assert [e.name for e in chosen_experiments("sql,rag,calc")] == ["sql", "rag", "calc"]
    assert [e.name for e in chosen_experiments("rag,rag")] == ["rag"]
    assert chosen_experiments("") == list(EXPERIMENTS)


def test_the_real_model_runs_its_own_demos() -> None:
    sys.path.insert(0, str(REPO_ROOT / "examples"))
    from experiments import SMOLLM2_EXPERIMENTS, chosen_experiments

    assert chosen_experiments("", "smollm2") == list(SMOLLM2_EXPERIMENTS)
    assert chosen_experiments("calc", "smollm2")[0].script == "examples/calc/demo_smollm2.py"
