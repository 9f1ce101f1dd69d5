"""The gate as specified: zero retry debt by default, judge and human evidence shown as such (never
verified), the loop's stop conditions for an unavailable parent and an unverifiable canary, and stale
evidence when the tool contract, permissions, destination, model server or retry policy change."""

from __future__ import annotations

import shutil
from pathlib import Path

from ledger import ledger_agent, ledger_tasks, verify_row
from scenario import NAME, Spec, build_branch, gather_evidence, setup_gate

from lightningrl.release import (
    CanaryTask,
    Verification,
    approve,
    build_receipt,
    check_receipt,
    current_report,
    run_canary,
    stop_reason,
)
from lightningstore import LightningStore, Rollout, SqlStore
from lightningstore.gate import (
    ENVIRONMENT_PARTS,
    CheckName,
    CheckStatus,
    DeploymentEnvironment,
    GatePolicy,
    OutcomeSource,
    Verdict,
    gate_records,
)


async def test_one_unexpected_retry_fails_the_default_budget(tmp_path: Path) -> None:
    assert GatePolicy(resource_name="any").retry_budget == 0
    store = SqlStore(tmp_path / "store.db")
    gate = gate_records(store)
    root = await setup_gate(store, gate, tmp_path / "root")  # a policy that does not name a budget
    branch = await build_branch(store, root, Spec("A", unexpected_retries=1), tmp_path)
    receipt = await build_receipt(store, gate, branch.candidate.version_id)
    assert receipt.retry_budget == 0
    debt = (await check_receipt(store, gate, receipt.receipt_id)).check(CheckName.RETRY_DEBT)
    assert debt.status == CheckStatus.FAIL and debt.reason.startswith("1 unexpected retries (budget 0)")
    await store.close()


def judged_by_a_model(task: CanaryTask, rollout: Rollout, store: LightningStore) -> Verification:
    """A destination no program can read back: the even tasks are checked, the odd ones only judged."""
    if int(task.task_id.rsplit("-", 1)[1]) % 2:
        return Verification(True, "the judge thinks the row is right", source="judge", uncertainty=0.3)
    return verify_row(task, rollout, store)


async def test_judge_evidence_is_shown_as_such_and_never_verifies(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    gate = gate_records(store)
    root = await setup_gate(store, gate, tmp_path / "root")
    branch = await build_branch(store, root, Spec("A"), tmp_path)
    receipt = await build_receipt(store, gate, branch.candidate.version_id)
    tasks = ledger_tasks(tmp_path / "ledger.db", "J", count=6)
    record = await run_canary(store, gate, receipt.receipt_id, ledger_agent, tasks, judged_by_a_model)
    judged = [o for o in record.body.outcomes if o.source == OutcomeSource.JUDGE]
    assert len(judged) == 3 and all(not o.verified and o.uncertainty == 0.3 for o in judged)
    canary = (await check_receipt(store, gate, receipt.receipt_id)).check(CheckName.CANARY)
    assert canary.status == CheckStatus.FAIL
    assert canary.reason.startswith(
        "3 of 6 canary outcomes verified; 3 judge evidence (not verified, uncertainty up to 0.30)"
    )
    assert [j["source"] for j in canary.evidence["judged"]] == ["judge"] * 3
    stop = await stop_reason(store, NAME, gate=gate)
    assert stop is not None and "cannot verify 3 of 6 external effects (first J-1: judge:" in stop
    await store.close()


async def test_stop_when_the_parent_becomes_unavailable(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    gate = gate_records(store)
    root = await setup_gate(store, gate, tmp_path / "root")
    branch = await build_branch(store, root, Spec("A", train=8), tmp_path)
    assert await stop_reason(store, NAME, gate=gate) is None
    shutil.rmtree(branch.parent.artifact)  # the parent's artifact is gone: rolling back is impossible
    reason = await stop_reason(store, NAME, gate=gate)
    assert reason is not None and "the parent of the latest version is unavailable" in reason
    assert branch.parent.version_id in reason
    await store.close()


async def test_a_changed_environment_invalidates_only_the_checks_that_relied_on_it(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    gate = gate_records(store)
    root = await setup_gate(store, gate, tmp_path / "root")
    policy = await gate.policy_or_default(NAME)
    declared = DeploymentEnvironment(
        tool_contract={"write_row": "v1"},
        permissions=["ledger:write"],
        destination="ledger.db",
        model_server="tiny@cpu",
    )
    policy = policy.model_copy(update={"environment": declared})
    await gate.put_policy(policy, recorded_by="admin:ops")
    branch = await build_branch(store, root, Spec("A"), tmp_path)
    receipt = await gather_evidence(store, gate, branch, tmp_path)
    await approve(store, gate, receipt.receipt_id, actor="alice")
    report = await check_receipt(store, gate, receipt.receipt_id)
    assert report.verdict == Verdict.PROMOTE, [c.reason for c in report.failing]
    canary = report.check(CheckName.CANARY)
    assert set(canary.evidence["relied_on"]) == {
        "evaluator",
        "canary",
        *ENVIRONMENT_PARTS,
    }  # what it rested on
    assert set(report.check(CheckName.RETRY_DEBT).evidence["relied_on"]) == {
        "train",
        "holdout",
        "retry_policy",
    }

    changes = {
        "tool_contract": (
            {"environment": declared.model_copy(update={"tool_contract": {"write_row": "v2"}})},
            {CheckName.CANARY},
        ),
        "permissions": (
            {"environment": declared.model_copy(update={"permissions": ["ledger:admin"]})},
            {CheckName.CANARY},
        ),
        "destination": (
            {"environment": declared.model_copy(update={"destination": "other.db"})},
            {CheckName.CANARY},
        ),
        "model_server": (
            {"environment": declared.model_copy(update={"model_server": "tiny@gpu"})},
            {CheckName.CANARY, CheckName.ROLLBACK},
        ),
        "retry_policy": ({"expected_retry_markers": ["resample", "rate-limit"]}, {CheckName.RETRY_DEBT}),
    }
    for part, (update, affected) in changes.items():
        await gate.put_policy(policy.model_copy(update=update), recorded_by="admin:ops")
        now = await current_report(store, gate, receipt.receipt_id)
        assert now is not None and now.verdict == Verdict.HOLD, part
        stale = {c.name for c in now.checks if c.status == CheckStatus.UNAVAILABLE}
        assert stale == affected, (part, stale)
        assert all(part in c.reason for c in now.checks if c.name in affected), part
    await gate.put_policy(policy.model_copy(update=changes["destination"][0]), recorded_by="admin:ops")
    fresh = (await check_receipt(store, gate, receipt.receipt_id)).check(CheckName.CANARY)
    assert (
        fresh.status == CheckStatus.UNAVAILABLE
        and fresh.reason == "canary is stale: destination changed since it ran"
    )
    await store.close()
