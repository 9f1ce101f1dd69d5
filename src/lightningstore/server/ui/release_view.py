"""The release page: each receipt (newest first) with its latest report's seven checks and verdict, and
the evidence recorded for it."""

from __future__ import annotations

from dataclasses import dataclass

from lightningstore.gate.evidence import EvidenceRecord
from lightningstore.gate.receipt import UpdateReceipt
from lightningstore.gate.records import GateRecords
from lightningstore.gate.verdict import GateReport


@dataclass(frozen=True)
class ReceiptView:
    receipt: UpdateReceipt
    report: GateReport | None
    """The latest report (None: never checked)."""
    reports: int
    evidence: list[EvidenceRecord]


async def release_view(gate: GateRecords) -> list[ReceiptView]:
    views = []
    for receipt in reversed(await gate.list_receipts()):
        reports = await gate.list_reports(receipt.receipt_id)
        evidence = await gate.list_evidence(receipt.receipt_id)
        views.append(
            ReceiptView(
                receipt=receipt,
                report=reports[-1] if reports else None,
                reports=len(reports),
                evidence=evidence,
            )
        )
    return views
