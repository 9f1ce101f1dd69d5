"""Run the seven checks of a receipt into a GateReport; mark the checks of an older report that went stale."""

from __future__ import annotations

import time
import uuid

from lightningrl.release.checks_data import check_coverage, check_pinned, check_retry_debt
from lightningrl.release.checks_outcome import check_holdout, check_protected
from lightningrl.release.checks_release import check_canary, check_rollback
from lightningrl.release.inputs import CheckInputs, load_inputs
from lightningstore import LightningStore, NotFoundError
from lightningstore.gate import (
    Basis,
    CheckResult,
    CheckStatus,
    GateRecords,
    GateReport,
    UpdateReceipt,
    relied_on,
    stale_parts,
    verdict_of,
)


async def get_receipt(gate: GateRecords, receipt_id: str) -> UpdateReceipt:
    receipt = await gate.get_receipt(receipt_id)
    if receipt is None:
        raise NotFoundError("receipt", receipt_id)
    return receipt


async def run_checks(store: LightningStore, inputs: CheckInputs) -> list[CheckResult]:
    """The seven checks, in order."""
    return [
        await check_pinned(store, inputs),
        await check_coverage(store, inputs),
        await check_retry_debt(store, inputs),
        await check_holdout(store, inputs),
        await check_protected(store, inputs),
        check_canary(inputs),
        await check_rollback(store, inputs),
    ]


async def check_receipt(
    store: LightningStore,
    gate: GateRecords,
    receipt_id: str,
    *,
    recorded_by: str = "local:unnamed",
    record: bool = True,
) -> GateReport:
    """Judge a receipt against the store now; record the report unless `record` is False."""
    receipt = await get_receipt(gate, receipt_id)
    inputs = await load_inputs(store, gate, receipt)
    checks = [
        c.model_copy(update={"evidence": {**c.evidence, "relied_on": relied_on(c.name, inputs.basis)}})
        for c in await run_checks(store, inputs)
    ]
    report = GateReport(
        report_id=f"rep-{uuid.uuid4().hex[:16]}",
        receipt_id=receipt.receipt_id,
        candidate_version_id=receipt.candidate_version_id,
        checks=checks,
        verdict=verdict_of(checks),
        basis=inputs.basis,
        recorded_by=recorded_by,
        create_time=time.time(),
    )
    return await gate.add_report(report) if record else report


def with_staleness(report: GateReport, now: Basis) -> GateReport:
    """The report as it stands on basis `now`: checks whose inputs changed become unavailable (stale)."""
    checks: list[CheckResult] = []
    notes: list[str] = []
    for check in report.checks:
        changed = stale_parts(check.name, report.basis, now)
        if changed:
            reason = f"stale: {', '.join(changed)} changed since the check (was: {check.reason})"
            checks.append(check.model_copy(update={"status": CheckStatus.UNAVAILABLE, "reason": reason}))
            notes.append(f"{check.name.value} stale ({', '.join(changed)})")
        else:
            checks.append(check)
    return report.model_copy(update={"checks": checks, "verdict": verdict_of(checks), "notes": notes})


async def current_report(store: LightningStore, gate: GateRecords, receipt_id: str) -> GateReport | None:
    """The latest recorded report with its stale checks marked, or None when none was recorded."""
    reports = await gate.list_reports(receipt_id)
    if not reports:
        return None
    inputs = await load_inputs(store, gate, await get_receipt(gate, receipt_id))
    return with_staleness(reports[-1], inputs.basis)
