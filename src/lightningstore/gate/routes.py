"""Gate routes under /v1/gate, and `install_gate(app)` that `build_app` mounts them with."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field

import lightningstore.auth.raw_path  # noqa: F401  (registers the `{name:id}` path convertor)
from lightningstore.auth.bearer import current_caller
from lightningstore.auth.tokens import Role
from lightningstore.errors import found
from lightningstore.gate.authority import (
    DEFINE_JUDGEMENT,
    FILE_RECEIPT,
    RECORD_EVIDENCE,
    recorded_by,
    require_reader,
    require_role,
)
from lightningstore.gate.evaluator import Evaluator
from lightningstore.gate.evidence import Approval, Evidence, EvidenceKind, EvidenceRecord
from lightningstore.gate.open import gate_records
from lightningstore.gate.plan import PlanBody, TrainingPlan
from lightningstore.gate.policy import GatePolicy
from lightningstore.gate.protected import ProtectedCase
from lightningstore.gate.receipt import ReceiptBody, UpdateReceipt
from lightningstore.gate.records import GateRecords
from lightningstore.gate.verdict import GateReport
from lightningstore.gate.whoami import WhoAmI

router = APIRouter(prefix="/v1/gate", tags=["gate"])
Actor = Field(default=None, max_length=200)
_UNSTATED_REPORTER = GateReport.model_fields["recorded_by"].default
"""A report's `recorded_by` when its sender left it out."""


class _ActorIn(BaseModel):
    """A gate write: its payload field, and who the caller says it is (`authority.recorded_by` decides
    what is recorded: a token's own name, never a different stated one)."""

    model_config = ConfigDict(extra="forbid")
    actor: str | None = Actor


class ReceiptIn(_ActorIn):
    body: ReceiptBody


class PlanIn(_ActorIn):
    body: PlanBody


class EvidenceIn(_ActorIn):
    body: Evidence


class EvaluatorIn(_ActorIn):
    evaluator: Evaluator


class ProtectedCaseIn(_ActorIn):
    case: ProtectedCase


class PolicyIn(_ActorIn):
    policy: GatePolicy


def _reader(request: Request) -> GateRecords:
    """The app's gate records, once the caller may read them."""
    require_reader(current_caller(request))
    return request.app.state.gate


def _writer(
    request: Request, allowed: frozenset[Role], action: str, *stated: str | None, strict: bool = False
) -> tuple[GateRecords, str]:
    """The app's gate records and who the write is recorded by (`authority.recorded_by`: the token's
    identity; `strict`, a stated other name is 403), once the caller's role may do `action`."""
    caller = current_caller(request)
    require_role(caller, allowed, action)
    by = recorded_by(caller, *stated, checked=request.app.state.tokens.enabled, strict=strict)
    return request.app.state.gate, by


@router.get("/whoami")
async def whoami(request: Request) -> WhoAmI:
    """The caller's identity from its credentials (what `actor` may state, and what is recorded)."""
    caller = current_caller(request)
    by = recorded_by(caller, checked=request.app.state.tokens.enabled)
    return WhoAmI(role=caller.role, name=caller.name, recorded_by=by)


@router.post("/receipts")
async def add_receipt(request: Request, body: ReceiptIn) -> UpdateReceipt:
    """File an immutable receipt (same body again: the stored one)."""
    gate, by = _writer(request, FILE_RECEIPT, "file receipts", body.actor)
    return await gate.add_receipt(body.body, created_by=by)


@router.post("/plans")
async def add_plan(request: Request, body: PlanIn) -> TrainingPlan:
    """File an immutable training plan before training (same body again: the stored one)."""
    gate, by = _writer(request, FILE_RECEIPT, "file training plans", body.actor)
    return await gate.add_plan(body.body, created_by=by)


@router.get("/plans/{plan_id:id}")
async def get_plan(request: Request, plan_id: str) -> TrainingPlan:
    """One training plan (404 when there is none)."""
    return found(await _reader(request).get_plan(plan_id), "training plan", plan_id)


@router.get("/receipts")
async def list_receipts(
    request: Request, resource_name: str | None = None, candidate_version_id: str | None = None
) -> list[UpdateReceipt]:
    """Receipts, oldest first."""
    return await _reader(request).list_receipts(
        resource_name=resource_name, candidate_version_id=candidate_version_id
    )


@router.get("/receipts/{receipt_id:id}")
async def get_receipt(request: Request, receipt_id: str) -> UpdateReceipt:
    """One receipt (404 if unknown)."""
    return found(await _reader(request).get_receipt(receipt_id), "receipt", receipt_id)


@router.post("/reports")
async def add_report(request: Request, report: GateReport) -> GateReport:
    """Append a check report (approver or admin)."""
    stated = None if report.recorded_by == _UNSTATED_REPORTER else report.recorded_by
    gate, by = _writer(request, RECORD_EVIDENCE, "record gate reports", stated, strict=True)
    return await gate.add_report(report.model_copy(update={"recorded_by": by}))


@router.get("/receipts/{receipt_id:id}/reports")
async def list_reports(request: Request, receipt_id: str) -> list[GateReport]:
    return await _reader(request).list_reports(receipt_id)


@router.post("/evidence")
async def add_evidence(request: Request, body: EvidenceIn) -> EvidenceRecord:
    """Append a canary run, rollback drill or approval (approver or admin)."""
    # An approval names its approver in its body too: that name must be the token's as well.
    named = body.body.actor if isinstance(body.body, Approval) else None
    action = f"record {body.body.kind} evidence"
    gate, by = _writer(request, RECORD_EVIDENCE, action, body.actor, named, strict=True)
    return await gate.add_evidence(body.body, recorded_by=by)


@router.get("/receipts/{receipt_id:id}/evidence")
async def list_evidence(
    request: Request, receipt_id: str, kind: EvidenceKind | None = None
) -> list[EvidenceRecord]:
    return await _reader(request).list_evidence(receipt_id, kind)


@router.post("/evaluators")
async def register_evaluator(request: Request, body: EvaluatorIn) -> Evaluator:
    """Register an evaluator version (admin only)."""
    gate, by = _writer(request, DEFINE_JUDGEMENT, "register evaluators", body.actor)
    return await gate.register_evaluator(body.evaluator, recorded_by=by)


@router.get("/evaluators")
async def list_evaluators(request: Request) -> list[Evaluator]:
    return await _reader(request).list_evaluators()


@router.get("/evaluators/{name:id}/current")
async def current_evaluator(request: Request, name: str) -> Evaluator:
    return found(await _reader(request).current_evaluator(name), "evaluator", name)


@router.put("/protected-cases")
async def put_protected_case(request: Request, body: ProtectedCaseIn) -> ProtectedCase:
    """Create or replace a protected case (admin only)."""
    gate, by = _writer(request, DEFINE_JUDGEMENT, "change protected cases", body.actor)
    return await gate.put_protected_case(body.case, recorded_by=by)


@router.delete("/protected-cases/{resource_name:id}/{case_id:id}")
async def remove_protected_case(request: Request, resource_name: str, case_id: str) -> dict[str, bool]:
    gate, _ = _writer(request, DEFINE_JUDGEMENT, "change protected cases")
    await gate.remove_protected_case(resource_name, case_id)
    return {"removed": True}


@router.get("/protected-cases")
async def list_protected_cases(request: Request, resource_name: str) -> list[ProtectedCase]:
    return await _reader(request).list_protected_cases(resource_name)


@router.put("/policies")
async def put_policy(request: Request, body: PolicyIn) -> GatePolicy:
    """Create or replace a resource's release policy (admin only)."""
    gate, by = _writer(request, DEFINE_JUDGEMENT, "change gate policies", body.actor)
    return await gate.put_policy(body.policy, recorded_by=by)


@router.get("/policies/{resource_name:id}")
async def get_policy(request: Request, resource_name: str) -> GatePolicy | None:
    """The stored policy, or null (the defaults apply)."""
    return await _reader(request).get_policy(resource_name)


def install_gate(app: FastAPI) -> GateRecords:
    """Add the `/v1/gate` routes to `app` (from `build_app`; its `state.store` backs the records)."""
    gate = gate_records(app.state.store)
    app.state.gate = gate
    app.include_router(router)
    return gate
