"""The four-candidate case on real store records: A promotes; B, C and D hold for their own reasons."""

from __future__ import annotations

from pathlib import Path

from scenario import Spec, build_branch, gather_evidence, setup_gate

from lightningrl.release import approve, check_receipt
from lightningstore import SqlStore
from lightningstore.gate import CheckName, CheckStatus, Verdict, gate_records

SPECS = [
    Spec("A"),
    Spec("B", train=100, incomplete=37, unexpected_retries=14, expected_retries=3),
    Spec("C", parent_holdout=0.2, candidate_holdout=1.0, protected_broken=3),
    Spec("D", sloppy=True, parent_missing=True),
]


async def test_four_candidates(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    gate = gate_records(store)
    root = await setup_gate(store, gate, tmp_path / "root")
    branches = [await build_branch(store, root, spec, tmp_path) for spec in SPECS]
    reports = {}
    for branch in branches:
        receipt = await gather_evidence(store, gate, branch, tmp_path)
        first = await check_receipt(store, gate, receipt.receipt_id)
        assert first.check(CheckName.ROLLBACK).status != CheckStatus.PASS  # nobody approved yet
        await approve(store, gate, receipt.receipt_id, actor="alice")
        reports[branch.spec.label] = await check_receipt(store, gate, receipt.receipt_id)
    failing = {label: {c.name for c in r.failing} for label, r in reports.items()}

    assert reports["A"].verdict == Verdict.PROMOTE and failing["A"] == set()

    b = reports["B"]
    assert b.verdict == Verdict.HOLD and failing["B"] == {CheckName.COVERAGE, CheckName.RETRY_DEBT}
    assert b.check(CheckName.COVERAGE).status == CheckStatus.FAIL
    assert "83 of 120" in b.check(CheckName.COVERAGE).reason
    assert b.check(CheckName.RETRY_DEBT).evidence["unexpected"] == 14
    assert b.check(CheckName.RETRY_DEBT).evidence["expected"] == 3

    c = reports["C"]
    assert c.verdict == Verdict.HOLD and failing["C"] == {CheckName.PROTECTED}
    assert "3 of 5" in c.check(CheckName.PROTECTED).reason
    gains = {label: r.check(CheckName.HOLDOUT).evidence["gain"] for label, r in reports.items()}
    assert max(gains, key=gains.__getitem__) == "C"

    d = reports["D"]
    assert d.verdict == Verdict.HOLD and failing["D"] == {CheckName.CANARY, CheckName.ROLLBACK}
    assert "18 of 20" in d.check(CheckName.CANARY).reason
    assert d.check(CheckName.ROLLBACK).reason.startswith("parent unresolvable")
    assert all(c.status == CheckStatus.FAIL for c in d.failing)
    await store.close()
