"""GateRecords: the durable home of receipts, reports, evidence, evaluators, protected cases and policies.

These docstrings are the contract both implementations (SQL, HTTP) follow. Who may write what is
decided by the server from the caller's credentials (lightningstore.gate.authority), not here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from lightningstore.gate.evaluator import Evaluator
from lightningstore.gate.evidence import Evidence, EvidenceKind, EvidenceRecord
from lightningstore.gate.plan import PlanBody, TrainingPlan
from lightningstore.gate.policy import GatePolicy
from lightningstore.gate.protected import ProtectedCase
from lightningstore.gate.receipt import ReceiptBody, UpdateReceipt
from lightningstore.gate.verdict import GateReport


class GateRecords(ABC):
    """Release-gate records of one store."""

    @abstractmethod
    async def add_receipt(self, body: ReceiptBody, *, created_by: str) -> UpdateReceipt:
        """Store a receipt under the digest of its body; storing the same body again returns the
        stored receipt unchanged (receipts are immutable: a changed body is a new receipt)."""

    @abstractmethod
    async def get_receipt(self, receipt_id: str) -> UpdateReceipt | None:
        """The receipt, or None."""

    @abstractmethod
    async def list_receipts(
        self, *, resource_name: str | None = None, candidate_version_id: str | None = None
    ) -> list[UpdateReceipt]:
        """Receipts matching the filters, oldest first."""

    @abstractmethod
    async def add_plan(self, body: PlanBody, *, created_by: str) -> TrainingPlan:
        """Store a training plan under the digest of its body; the same body again returns the stored
        plan unchanged (plans are immutable)."""

    @abstractmethod
    async def get_plan(self, plan_id: str) -> TrainingPlan | None:
        """The plan, or None."""

    @abstractmethod
    async def add_report(self, report: GateReport) -> GateReport:
        """Append a report of a stored receipt (NotFoundError otherwise); reports are never changed."""

    @abstractmethod
    async def list_reports(self, receipt_id: str) -> list[GateReport]:
        """Reports of a receipt, oldest first."""

    @abstractmethod
    async def add_evidence(self, body: Evidence, *, recorded_by: str) -> EvidenceRecord:
        """Append a canary run, rollback drill or approval of a stored receipt (NotFoundError otherwise)."""

    @abstractmethod
    async def list_evidence(self, receipt_id: str, kind: EvidenceKind | None = None) -> list[EvidenceRecord]:
        """Evidence of a receipt (of one kind), oldest first."""

    @abstractmethod
    async def register_evaluator(self, evaluator: Evaluator, *, recorded_by: str) -> Evaluator:
        """Register an evaluator version; it becomes the name's current one. Registering the same
        (name, version) again with other content raises ConflictError."""

    @abstractmethod
    async def current_evaluator(self, name: str) -> Evaluator | None:
        """The newest registered version of the evaluator, or None."""

    @abstractmethod
    async def list_evaluators(self) -> list[Evaluator]:
        """Every registered evaluator version, oldest first."""

    @abstractmethod
    async def put_protected_case(self, case: ProtectedCase, *, recorded_by: str) -> ProtectedCase:
        """Create or replace a protected case (keyed by resource name and case id)."""

    @abstractmethod
    async def remove_protected_case(self, resource_name: str, case_id: str) -> None:
        """Remove a protected case (NotFoundError if there is none)."""

    @abstractmethod
    async def list_protected_cases(self, resource_name: str) -> list[ProtectedCase]:
        """The resource's protected cases, by case id."""

    @abstractmethod
    async def put_policy(self, policy: GatePolicy, *, recorded_by: str) -> GatePolicy:
        """Create or replace the resource's policy."""

    @abstractmethod
    async def get_policy(self, resource_name: str) -> GatePolicy | None:
        """The resource's policy, or None (callers then use GatePolicy defaults)."""

    async def policy_or_default(self, resource_name: str) -> GatePolicy:
        """The stored policy, else the defaults."""
        return await self.get_policy(resource_name) or GatePolicy(resource_name=resource_name)
