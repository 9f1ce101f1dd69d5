"""The release gate's records: update receipts, check reports, evidence, evaluators, protected cases, policy.

The store server (`build_app`) mounts the HTTP routes; open the records of a store with `gate_records(store)`.
"""

from lightningstore.gate.check import CheckName, CheckResult, CheckStatus
from lightningstore.gate.evaluator import Evaluator
from lightningstore.gate.evidence import (
    Approval,
    CanaryOutcome,
    CanaryRun,
    Evidence,
    EvidenceKind,
    EvidenceRecord,
    OutcomeSource,
    RollbackDrill,
)
from lightningstore.gate.plan import PLAN_FIELDS, PlanBody, TrainingPlan
from lightningstore.gate.policy import CanaryLimits, DeploymentEnvironment, GatePolicy, StopThresholds
from lightningstore.gate.protected import ProtectedCase
from lightningstore.gate.receipt import DataSnapshot, EvaluatorRef, ReceiptBody, UpdateReceipt, digest
from lightningstore.gate.records import GateRecords
from lightningstore.gate.verdict import (
    DEPENDS_ON,
    ENVIRONMENT_PARTS,
    Basis,
    GateReport,
    Verdict,
    relied_on,
    stale_parts,
    verdict_of,
)
from lightningstore.lazy_exports import lazy_exports

# These pull in SQLAlchemy, httpx or FastAPI; imported only when asked for.
__getattr__ = lazy_exports(
    __name__,
    {"gate_records": "lightningstore.gate.open", "SqlGateRecords": "lightningstore.gate.sql_records"},
)


__all__ = [
    "DEPENDS_ON",
    "ENVIRONMENT_PARTS",
    "DeploymentEnvironment",
    "PLAN_FIELDS",
    "PlanBody",
    "TrainingPlan",
    "Approval",
    "Basis",
    "CanaryLimits",
    "CanaryOutcome",
    "CanaryRun",
    "CheckName",
    "CheckResult",
    "CheckStatus",
    "DataSnapshot",
    "EvaluatorRef",
    "Evaluator",
    "Evidence",
    "EvidenceKind",
    "EvidenceRecord",
    "OutcomeSource",
    "GatePolicy",
    "GateRecords",
    "GateReport",
    "ProtectedCase",
    "ReceiptBody",
    "RollbackDrill",
    "SqlGateRecords",
    "StopThresholds",
    "UpdateReceipt",
    "Verdict",
    "digest",
    "gate_records",
    "relied_on",
    "stale_parts",
    "verdict_of",
]
