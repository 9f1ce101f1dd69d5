"""Release of candidates through the gate: receipts, the seven checks, canary and rollback runs, stop conditions.

receipt = await build_receipt(store, gate, candidate_id)
await run_canary(store, gate, receipt.receipt_id, agent, tasks, verifier)
await drill_rollback(store, gate, receipt.receipt_id)
report = await check_receipt(store, gate, receipt.receipt_id)      # verdict PROMOTE / HOLD
await approve(store, gate, receipt.receipt_id, actor="alice")
await promote(store, gate, receipt.receipt_id, actor="alice")     # moves `approved` or refuses
await rollback(store, gate, receipt.receipt_id, actor="alice")    # back to the exact parent
"""

from lightningrl.release.bounded_run import BoundedRun, bounded_run
from lightningrl.release.canary import run_canary
from lightningrl.release.errors import GateRefusal
from lightningrl.release.plan_filing import file_plan, file_plan_id, tasks_snapshot
from lightningrl.release.promotion import Promotion, approve, promote
from lightningrl.release.receipt_builder import build_receipt
from lightningrl.release.report import check_receipt, current_report, with_staleness
from lightningrl.release.revision import code_revision
from lightningrl.release.rollback import drill_rollback, rollback
from lightningrl.release.routing import Resolution, production_routes, resolve_version
from lightningrl.release.routing_run import RoutingProof, production_run
from lightningrl.release.spans import span_kind
from lightningrl.release.stop import gate_stop_check, stop_reason
from lightningrl.release.verifier import CanaryTask, Verification, Verifier

__all__ = [
    "BoundedRun",
    "CanaryTask",
    "GateRefusal",
    "Promotion",
    "Resolution",
    "RoutingProof",
    "Verification",
    "Verifier",
    "approve",
    "bounded_run",
    "build_receipt",
    "check_receipt",
    "code_revision",
    "current_report",
    "drill_rollback",
    "file_plan",
    "file_plan_id",
    "production_routes",
    "production_run",
    "promote",
    "resolve_version",
    "rollback",
    "run_canary",
    "span_kind",
    "gate_stop_check",
    "stop_reason",
    "tasks_snapshot",
    "with_staleness",
]
