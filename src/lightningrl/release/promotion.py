"""Approve a receipt and promote its candidate: `approved` moves only on a fresh PROMOTE verdict."""

from __future__ import annotations

from dataclasses import dataclass

from lightningrl.release.errors import GateRefusal
from lightningrl.release.inputs import load_inputs
from lightningrl.release.report import check_receipt, current_report, get_receipt
from lightningrl.release.routing import production_routes
from lightningstore import LightningStore, PermissionDeniedError, PointerMove
from lightningstore.gate import Approval, EvidenceRecord, GateRecords, GateReport, Verdict


async def approve(
    store: LightningStore,
    gate: GateRecords,
    receipt_id: str,
    *,
    actor: str,
    note: str = "",
    recorded_by: str | None = None,
) -> EvidenceRecord:
    """Record an approval of the receipt on the current basis (a later change of it voids the approval)."""
    receipt = await get_receipt(gate, receipt_id)
    inputs = await load_inputs(store, gate, receipt)
    reports = await gate.list_reports(receipt_id)
    approval = Approval(
        receipt_id=receipt.receipt_id,
        actor=actor,
        note=note,
        basis=inputs.basis,
        report_id=reports[-1].report_id if reports else None,
    )
    return await gate.add_evidence(approval, recorded_by=recorded_by or f"local:{actor}")


@dataclass(frozen=True)
class Promotion:
    """What `promote` did: the report it acted on, the pointer move, and where production routes now."""

    report: GateReport
    move: PointerMove
    routes: dict[str, str | None]


async def promote(
    store: LightningStore,
    gate: GateRecords,
    receipt_id: str,
    *,
    actor: str,
    recorded_by: str | None = None,
) -> Promotion:
    """Re-run the checks (or, when the credential cannot read spans, take the latest recorded report with
    its stale checks marked); move `approved` to the candidate only on PROMOTE, else GateRefusal."""
    receipt = await get_receipt(gate, receipt_id)
    plan = await gate.get_plan(receipt.plan_id) if receipt.plan_id else None
    if plan is not None and plan.default_approvers and actor not in plan.default_approvers:
        raise GateRefusal(
            f"{actor} may not make a candidate the default: the training plan {plan.plan_id} names "
            f"{', '.join(plan.default_approvers)}"
        )
    try:
        report: GateReport | None = await check_receipt(
            store, gate, receipt_id, recorded_by=recorded_by or f"local:{actor}"
        )
    except PermissionDeniedError:
        report = await current_report(store, gate, receipt_id)
    if report is None:
        raise GateRefusal(f"receipt {receipt_id} has no report; run `lightningrl release check` first")
    if report.verdict != Verdict.PROMOTE:
        failing = "; ".join(f"{c.name.value}: {c.status.value} ({c.reason})" for c in report.failing)
        raise GateRefusal(f"HOLD: {failing}")
    move = await store.move_pointer(
        receipt.resource_name,
        "approved",
        receipt.candidate_version_id,
        actor=actor,
        reason=f"gate: {Verdict.PROMOTE.value} (receipt {receipt.receipt_id}, report {report.report_id})",
    )
    routes = await production_routes(store, receipt.resource_name)
    return Promotion(report=report, move=move, routes=routes)
