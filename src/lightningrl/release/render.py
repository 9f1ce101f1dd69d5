"""Readable text for receipts, reports and evidence (the CLI prints these; `--json` prints the models)."""

from __future__ import annotations

from lightningstore import PointerMove, ResourceVersion
from lightningstore.gate import CheckStatus, EvidenceRecord, GateReport, UpdateReceipt, Verdict

MARKS = {CheckStatus.PASS: "PASS", CheckStatus.FAIL: "FAIL", CheckStatus.UNAVAILABLE: "N/A "}


def receipt_text(receipt: UpdateReceipt) -> str:
    lines = [
        f"receipt   {receipt.receipt_id}  (filed by {receipt.created_by})",
        f"resource  {receipt.resource_name}   scope {receipt.scope}",
        f"candidate {receipt.candidate_version_id}",
        f"parent    {receipt.parent_version_id or '(none)'}",
        f"train     {receipt.train.count} rollouts  sha256 {receipt.train.sha256[:16]}  [{receipt.train.selector}]",
        f"holdout   {receipt.holdout.count} rollouts  sha256 {receipt.holdout.sha256[:16]}",
        f"evaluator {receipt.evaluator or '(none pinned)'}",
        f"code      {receipt.code_revision}",
        f"algorithm {receipt.algorithm_config or '{}'}",
        f"retry budget {receipt.retry_budget}   span coverage {', '.join(receipt.span_coverage) or '(none)'}",
    ]
    return "\n".join(lines)


def report_text(report: GateReport) -> str:
    lines = [
        f"checks of {report.receipt_id} (candidate {report.candidate_version_id}, report {report.report_id})"
    ]
    for i, check in enumerate(report.checks, 1):
        lines.append(f"  {i}. [{MARKS[check.status]}] {check.name.value:<22} {check.reason}")
    lines.append(f"verdict: {report.verdict.value}")
    if report.verdict == Verdict.HOLD:
        lines[-1] += " on " + ", ".join(c.name.value for c in report.failing)
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)


def evidence_text(record: EvidenceRecord) -> str:
    body = record.body
    head = f"{record.kind.value} {record.evidence_id} by {record.recorded_by}"
    if body.kind == "canary":
        verified = sum(1 for o in body.outcomes if o.verified)
        stop = f", stopped by {body.stopped_by}" if body.stopped_by else ""
        return (
            f"{head}: {verified} of {len(body.planned)} verified, {body.tool_calls} tool calls, "
            f"cost {body.cost:.3f}, {body.seconds:.1f}s{stop}"
        )
    if body.kind == "rollback":
        what = "rollback" if body.moved_pointer else "drill"
        return (
            f"{head}: {what} to {body.parent_version_id}: {body.reason}; routed to {body.routed_version_id}"
        )
    return f"{head}: approved by {body.actor}" + (f" ({body.note})" if body.note else "")


def pointers_text(
    name: str, latest: ResourceVersion | None, approved: ResourceVersion | None, history: list[PointerMove]
) -> str:
    lines = [
        f"resource {name}",
        f"  latest   {latest.version_id if latest else '(none)'}",
        f"  approved {approved.version_id if approved else '(none)'}",
        "  approved history (oldest first):",
    ]
    lines += [
        f"    {m.version_id}  by {m.actor}  (was {m.previous_version_id or '-'})  {m.reason}"
        for m in history
        if m.pointer.value == "approved"
    ]
    return "\n".join(lines)
