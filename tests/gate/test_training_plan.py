"""The receipt's before-training part: a training plan filed before training, copied unchanged into the
receipt, naming who may approve the canary and who may make the candidate the default."""

from __future__ import annotations

from pathlib import Path

import pytest
from scenario import NAME, Spec, build_branch, gather_evidence, setup_gate

from algorithm import Task
from lightningrl.release import (
    GateRefusal,
    approve,
    build_receipt,
    check_receipt,
    file_plan,
    promote,
    tasks_snapshot,
)
from lightningstore import SqlStore
from lightningstore.gate import CheckName, CheckStatus, Verdict, gate_records

PLANNED_CONFIG = {"estimator": "grpo", "lr": 1e-3, "steps": 20}


async def test_the_plan_is_frozen_before_training_and_governs_the_receipt(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    gate = gate_records(store)
    root = await setup_gate(store, gate, tmp_path / "root")
    policy = await gate.policy_or_default(NAME)
    await gate.put_policy(
        policy.model_copy(update={"canary_approvers": ["carol"], "default_approvers": ["dave"]}),
        recorded_by="admin:ops",
    )
    tasks = [Task(task_id=f"t{i}", input={"q": i}) for i in range(4)]
    plan = await file_plan(
        gate,
        NAME,
        root.version_id,
        train=tasks_snapshot("train tasks", tasks),
        holdout=tasks_snapshot("val tasks", tasks[:2]),
        algorithm_config=PLANNED_CONFIG,
    )
    assert plan.retry_budget == 0 and plan.evaluator is not None and plan.canary_approvers == ["carol"]
    again = await file_plan(
        gate, NAME, root.version_id, train=plan.train, holdout=plan.holdout, algorithm_config=PLANNED_CONFIG
    )
    assert again.plan_id == plan.plan_id and again.create_time == plan.create_time  # immutable

    # After filing, the policy loosens the budget: the run's receipts keep what was frozen.
    await gate.put_policy(
        (await gate.policy_or_default(NAME)).model_copy(update={"retry_budget": 5}), recorded_by="admin:ops"
    )
    branch = await build_branch(store, root, Spec("A", plan_id=plan.plan_id), tmp_path)
    receipt = await gather_evidence(store, gate, branch, tmp_path)
    assert receipt.plan_id == plan.plan_id and receipt.retry_budget == 0
    assert receipt.algorithm_config == PLANNED_CONFIG  # the plan's, not re-derived from the candidate

    await approve(store, gate, receipt.receipt_id, actor="alice", recorded_by="approver:alice")
    report = await check_receipt(store, gate, receipt.receipt_id)
    rollback = report.check(CheckName.ROLLBACK)
    assert rollback.status == CheckStatus.UNAVAILABLE and "from carol" in rollback.reason
    await approve(store, gate, receipt.receipt_id, actor="carol", recorded_by="approver:carol")
    report = await check_receipt(store, gate, receipt.receipt_id)
    assert report.verdict == Verdict.PROMOTE, [c.reason for c in report.failing]
    assert report.check(CheckName.PINNED).evidence["plan_id"] == plan.plan_id
    with pytest.raises(GateRefusal, match="names dave"):
        await promote(store, gate, receipt.receipt_id, actor="carol")
    done = await promote(store, gate, receipt.receipt_id, actor="dave")
    assert done.move.version_id == branch.candidate.version_id

    # A receipt that changes the frozen part is not the plan's: the pinned check fails and names it.
    rewritten = await gate.add_receipt(
        receipt.body().model_copy(update={"retry_budget": 5}), created_by="x:y"
    )
    pinned = (await check_receipt(store, gate, rewritten.receipt_id)).check(CheckName.PINNED)
    assert pinned.status == CheckStatus.FAIL
    assert pinned.reason == f"the receipt rewrote its training plan {plan.plan_id}: retry_budget differ"
    await store.close()


async def test_a_policy_that_requires_a_plan_holds_candidates_without_one(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    gate = gate_records(store)
    root = await setup_gate(store, gate, tmp_path / "root")
    await gate.put_policy(
        (await gate.policy_or_default(NAME)).model_copy(update={"require_plan": True}),
        recorded_by="admin:ops",
    )
    branch = await build_branch(store, root, Spec("A"), tmp_path)
    receipt = await build_receipt(store, gate, branch.candidate.version_id)
    pinned = (await check_receipt(store, gate, receipt.receipt_id)).check(CheckName.PINNED)
    assert pinned.status == CheckStatus.UNAVAILABLE
    assert pinned.reason == "no training plan was filed before training"
    await store.close()
