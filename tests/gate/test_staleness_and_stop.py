"""Staleness: a change of evaluator, parent or task distribution after a check invalidates it. Stop conditions."""

from __future__ import annotations

from pathlib import Path

import pytest
from records import record_rollout
from scenario import NAME, PROTECTED, Spec, build_branch, gather_evidence, setup_gate

from lightningrl.release import (
    GateRefusal,
    approve,
    check_receipt,
    current_report,
    promote,
    rollback,
    stop_reason,
)
from lightningstore import PromptTemplate, SqlStore
from lightningstore.gate import CheckName, CheckStatus, Evaluator, Verdict, gate_records


async def _promotable(tmp_path: Path):
    store = SqlStore(tmp_path / "store.db")
    gate = gate_records(store)
    root = await setup_gate(store, gate, tmp_path / "root")
    branch = await build_branch(store, root, Spec("A"), tmp_path)
    receipt = await gather_evidence(store, gate, branch, tmp_path)
    await approve(store, gate, receipt.receipt_id, actor="alice")
    report = await check_receipt(store, gate, receipt.receipt_id)
    assert report.verdict == Verdict.PROMOTE, [c.reason for c in report.failing]
    return store, gate, branch, receipt


async def test_new_evaluator_version_invalidates_the_checks_using_it(tmp_path: Path) -> None:
    store, gate, _, receipt = await _promotable(tmp_path)
    await gate.register_evaluator(Evaluator(name="exact-match", version="2"), recorded_by="local:admin")
    stale = await current_report(store, gate, receipt.receipt_id)
    assert stale is not None and stale.verdict == Verdict.HOLD
    unavailable = {c.name for c in stale.checks if c.status == CheckStatus.UNAVAILABLE}
    assert unavailable == {CheckName.PINNED, CheckName.HOLDOUT, CheckName.PROTECTED, CheckName.CANARY}
    assert "evaluator" in stale.check(CheckName.HOLDOUT).reason
    with pytest.raises(GateRefusal, match="HOLD"):
        await promote(store, gate, receipt.receipt_id, actor="alice")
    assert (await store.get_approved_version(NAME)).resource.template == "root"
    await store.close()


async def test_changed_task_distribution_and_parent_invalidate(tmp_path: Path) -> None:
    store, gate, branch, receipt = await _promotable(tmp_path)
    pset = await store.add_resource_set({NAME: branch.parent.version_id})
    await record_rollout(store, mode="train", resources_id=pset.resources_id, task_id="late", reward=1.0)
    stale = await current_report(store, gate, receipt.receipt_id)
    assert stale is not None and stale.verdict == Verdict.HOLD
    assert stale.check(CheckName.COVERAGE).status == CheckStatus.UNAVAILABLE
    assert "train" in stale.check(CheckName.COVERAGE).reason
    fresh = await check_receipt(store, gate, receipt.receipt_id)
    assert fresh.check(CheckName.PINNED).status == CheckStatus.FAIL  # the receipt's pinned train set changed
    other = await store.add_resource_version(NAME, PromptTemplate(template="elsewhere"))
    await store.move_pointer(NAME, "approved", other.version_id, actor="bob")
    moved = await current_report(store, gate, receipt.receipt_id)
    assert moved is not None and moved.check(CheckName.ROLLBACK).status == CheckStatus.UNAVAILABLE
    await store.close()


async def test_promote_then_rollback_keeps_pointer_history(tmp_path: Path) -> None:
    store, gate, branch, receipt = await _promotable(tmp_path)
    done = await promote(store, gate, receipt.receipt_id, actor="alice")
    assert done.move.version_id == branch.candidate.version_id
    assert done.routes["runner"] == branch.candidate.version_id
    record = await rollback(store, gate, receipt.receipt_id, actor="alice")
    assert record.body.routed_version_id == branch.parent.version_id
    assert (await store.get_approved_version(NAME)).version_id == branch.parent.version_id
    history = [(m.version_id, m.actor) for m in await store.query_pointer_history(NAME, "approved")]
    assert history[-2:] == [(branch.candidate.version_id, "alice"), (branch.parent.version_id, "alice")]
    await store.close()


async def test_stop_reason_on_coverage_retry_debt_and_protected(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    gate = gate_records(store)
    root = await setup_gate(store, gate, tmp_path / "root")
    await build_branch(store, root, Spec("A", train=20), tmp_path)
    assert await stop_reason(store, NAME, gate=gate) is None
    healthy = await store.add_resource_set({NAME: root.version_id})
    for i in range(6):
        await record_rollout(
            store,
            mode="train",
            resources_id=healthy.resources_id,
            task_id=f"t{i}",
            reward=1.0,
            kinds=("agent", "reward"),
            failures=("unresponsive",),
        )
    reason = await stop_reason(store, NAME, gate=gate)
    assert (
        reason is not None
        and "span coverage dropped" in reason
        and "retry debt 6 crossed its bound 0" in reason
    )
    latest = await store.get_latest_version(NAME)
    worse = await store.add_resource_version(
        NAME, PromptTemplate(template="worse"), parent_id=latest.version_id
    )
    wset = await store.add_resource_set({NAME: worse.version_id})
    lset = await store.add_resource_set({NAME: latest.version_id})
    await record_rollout(store, mode="test", resources_id=lset.resources_id, task_id=PROTECTED[0], reward=1.0)
    await record_rollout(store, mode="test", resources_id=wset.resources_id, task_id=PROTECTED[0], reward=0.0)
    reason = await stop_reason(store, NAME, gate=gate)
    assert reason is not None and f"case-{PROTECTED[0]}" in reason
    await store.close()
