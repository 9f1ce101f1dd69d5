"""Gate records: immutable content-addressed receipts, append-only reports and evidence, registries."""

from __future__ import annotations

import pytest

from lightningstore import ConflictError, LightningStore, NotFoundError
from lightningstore.gate import (
    Basis,
    CheckName,
    CheckResult,
    CheckStatus,
    DataSnapshot,
    Evaluator,
    GatePolicy,
    GateReport,
    PlanBody,
    ProtectedCase,
    ReceiptBody,
    Verdict,
    gate_records,
    stale_parts,
    verdict_of,
)


def _body(**changes: object) -> ReceiptBody:
    base = dict(
        resource_name="llm",
        candidate_version_id="rv-c",
        parent_version_id="rv-p",
        train=DataSnapshot.of("train", ["r1", "r2"]),
        holdout=DataSnapshot.of("holdout", ["r3"]),
        retry_budget=2,
        span_coverage=["llm"],
    )
    return ReceiptBody.model_validate({**base, **changes})


async def test_receipts_are_content_addressed_and_immutable(store: LightningStore) -> None:
    """On every backend: SQLite, PostgreSQL and the HTTP client (the server's /v1/gate routes)."""
    gate = gate_records(store)
    first = await gate.add_receipt(_body(), created_by="local:a")
    again = await gate.add_receipt(_body(), created_by="local:b")
    assert again == first and again.created_by == first.created_by
    other = await gate.add_receipt(_body(retry_budget=3), created_by="local:a")
    assert other.receipt_id != first.receipt_id
    assert DataSnapshot.of("x", ["b", "a", "a"]).sha256 == DataSnapshot.of("y", ["a", "b"]).sha256
    assert [r.receipt_id for r in await gate.list_receipts(candidate_version_id="rv-c")] == [
        first.receipt_id,
        other.receipt_id,
    ]
    basis = Basis(evaluator=None, parent="p", train="t", holdout="h", protected="x")
    report = GateReport(
        report_id="rep-1",
        receipt_id="rcpt-missing",
        candidate_version_id="rv-c",
        checks=[],
        verdict=Verdict.HOLD,
        basis=basis,
    )
    with pytest.raises(NotFoundError):
        await gate.add_report(report)


async def test_registries(store: LightningStore) -> None:
    gate = gate_records(store)
    await gate.register_evaluator(Evaluator(name="judge", version="1"), recorded_by="local:x")
    await gate.register_evaluator(Evaluator(name="judge", version="2"), recorded_by="local:x")
    assert (await gate.current_evaluator("judge")).version == "2"
    with pytest.raises(ConflictError):
        await gate.register_evaluator(
            Evaluator(name="judge", version="1", reward_name="other"), recorded_by="x"
        )
    case = ProtectedCase(resource_name="llm", case_id="c1", task_id="t1")
    await gate.put_protected_case(case, recorded_by="local:x")
    await gate.put_protected_case(case.model_copy(update={"min_reward": 0.5}), recorded_by="local:x")
    assert [c.min_reward for c in await gate.list_protected_cases("llm")] == [0.5]
    await gate.remove_protected_case("llm", "c1")
    with pytest.raises(NotFoundError):
        await gate.remove_protected_case("llm", "c1")
    assert await gate.get_policy("llm") is None
    assert (await gate.policy_or_default("llm")).retry_budget == GatePolicy(resource_name="llm").retry_budget
    await gate.put_policy(GatePolicy(resource_name="llm", retry_budget=7), recorded_by="local:x")
    assert (await gate.get_policy("llm")).retry_budget == 7


def test_verdict_needs_all_seven_passing_and_staleness_follows_dependencies() -> None:
    passing = [CheckResult(name=n, status=CheckStatus.PASS, reason="ok") for n in CheckName]
    assert verdict_of(passing) == Verdict.PROMOTE
    assert verdict_of(passing[:-1]) == Verdict.HOLD  # a missing check is not a pass
    unavailable = [
        *passing[:-1],
        CheckResult(name=CheckName.ROLLBACK, status=CheckStatus.UNAVAILABLE, reason=""),
    ]
    assert verdict_of(unavailable) == Verdict.HOLD
    then = Basis(evaluator="e@1", parent="p", train="t", holdout="h", protected="x", canary="c")
    now = then.model_copy(update={"evaluator": "e@2"})
    assert stale_parts(CheckName.HOLDOUT, then, now) == ["evaluator"]
    assert stale_parts(CheckName.RETRY_DEBT, then, now) == []


async def test_training_plans_are_content_addressed_and_immutable(store: LightningStore) -> None:
    """On every backend, the HTTP client included (POST /v1/gate/plans, GET /v1/gate/plans/{id})."""
    gate = gate_records(store)
    body = PlanBody(
        resource_name="llm",
        parent_version_id="rv-p",
        train=DataSnapshot.of("train tasks", ["t1", "t2"]),
        holdout=DataSnapshot.of("val tasks", ["t3"]),
        algorithm_config={"lr": 1e-3},
        canary_approvers=["carol"],
    )
    first = await gate.add_plan(body, created_by="local:a")
    assert first.plan_id.startswith("plan-") and first.body() == body
    again = await gate.add_plan(body, created_by="local:b")
    assert again == first  # the stored one, unchanged
    other = await gate.add_plan(body.model_copy(update={"scope": "eu"}), created_by="local:a")
    assert other.plan_id != first.plan_id
    assert await gate.get_plan(first.plan_id) == first
    assert await gate.get_plan("plan-missing") is None
