"""examples/release_gate/four_candidates.py: the specification's four candidates, judged from real records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lightningrl.processes.supervisor import child_env

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "release_gate" / "four_candidates.py"


def run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        env={**os.environ, **child_env()},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_four_candidates_script_prints_the_specified_verdicts(tmp_path: Path) -> None:
    reports = json.loads(run("--json", "--db", str(tmp_path / "gate.db")))
    verdicts = {label: r["verdict"] for label, r in reports.items()}
    assert all(r["plan"].startswith("plan-") for r in reports.values())  # each filed before its training
    assert verdicts == {"A": "PROMOTE TO BOUNDED CANARY", "B": "HOLD", "C": "HOLD", "D": "HOLD"}
    checks = {label: {c["name"]: c for c in r["checks"]} for label, r in reports.items()}
    assert len(checks["A"]) == 7 and all(c["status"] == "pass" for c in checks["A"].values())
    failing = {
        label: sorted(n for n, c in cs.items() if c["status"] != "pass") for label, cs in checks.items()
    }
    assert failing["B"] == ["retry_debt", "span_coverage"]
    assert failing["C"] == ["protected_cases"]
    assert failing["D"] == ["canary", "rollback_and_approval"]
    b, c, d = checks["B"], checks["C"], checks["D"]
    assert b["holdout_gain"]["evidence"]["gain"] == pytest.approx(0.08, abs=1e-6)
    assert b["span_coverage"]["reason"].startswith("83 of 120 finished rollouts have complete spans")
    assert b["retry_debt"]["evidence"]["unexpected"] == 14 and b["retry_debt"]["evidence"]["budget"] == 0
    assert c["holdout_gain"]["evidence"]["gain"] == pytest.approx(0.10, abs=1e-6)
    assert c["protected_cases"]["reason"].startswith("3 of 5 protected cases regress")
    assert d["holdout_gain"]["evidence"]["gain"] == pytest.approx(0.07, abs=1e-6)
    assert d["canary"]["reason"].startswith("18 of 20 canary outcomes verified")
    rollback = d["rollback_and_approval"]["reason"]
    assert rollback.startswith("parent unresolvable") and rollback.endswith("rollback to it was never tested")


def test_the_text_report_lists_every_check() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from four_candidates import as_text
    finally:
        sys.path.remove(str(SCRIPT.parent))
    from lightningstore.gate import CheckName, CheckResult, CheckStatus, GateReport, Verdict

    basis = {"evaluator": None, "parent": None, "train": "t", "holdout": "h", "protected": "p"}
    checks = [CheckResult(name=n, status=CheckStatus.PASS, reason=f"{n.value} ok") for n in CheckName]
    report = GateReport(
        report_id="r",
        receipt_id="x",
        candidate_version_id="v1",
        checks=checks,
        verdict=Verdict.PROMOTE,
        basis=basis,
    )
    lines = as_text({"A": report}).splitlines()
    assert lines[0] == "candidate A (v1): PROMOTE TO BOUNDED CANARY"
    assert [line.split()[1] for line in lines[1:8]] == [n.value for n in CheckName]
