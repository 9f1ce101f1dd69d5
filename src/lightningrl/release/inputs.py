"""Everything the seven checks read, loaded once per evaluation, and the basis it amounts to."""

from __future__ import annotations

from dataclasses import dataclass

from lightningrl.release.selection import EvidenceSets, evidence_sets, holdout_snapshot, train_snapshot
from lightningstore import LightningStore, ResourceVersion
from lightningstore.gate import (
    Basis,
    Evaluator,
    EvidenceKind,
    EvidenceRecord,
    GatePolicy,
    GateRecords,
    ProtectedCase,
    TrainingPlan,
    UpdateReceipt,
    digest,
)


@dataclass
class CheckInputs:
    """A receipt with the live records it is judged against."""

    receipt: UpdateReceipt
    policy: GatePolicy
    candidate: ResourceVersion | None
    parent: ResourceVersion | None
    approved: ResourceVersion | None
    evaluator_now: Evaluator | None
    cases: list[ProtectedCase]
    sets: EvidenceSets
    evidence: list[EvidenceRecord]
    basis: Basis
    plan: TrainingPlan | None = None

    def latest(self, kind: EvidenceKind) -> EvidenceRecord | None:
        found = [e for e in self.evidence if e.kind == kind]
        return found[-1] if found else None


def environment_basis(policy: GatePolicy) -> dict[str, str | None]:
    """The basis parts of the deployment environment and retry policy: a digest each (None when undeclared)."""
    env = policy.environment
    declared = {
        "tool_contract": env.tool_contract or None,
        "permissions": sorted(env.permissions) or None,
        "destination": env.destination,
        "model_server": env.model_server,
    }
    parts = {k: None if v is None else digest(v)[:16] for k, v in declared.items()}
    retry = {"budget": policy.retry_budget, "expected": sorted(policy.expected_retry_markers)}
    parts["retry_policy"] = digest(retry)[:16]
    return parts


async def load_inputs(store: LightningStore, gate: GateRecords, receipt: UpdateReceipt) -> CheckInputs:
    """Read the candidate, parent, pointers, evaluator, protected cases, evidence rollouts and gate evidence."""
    name = receipt.resource_name
    candidate = await store.get_resource_version(receipt.candidate_version_id)
    parent = (
        await store.get_resource_version(receipt.parent_version_id) if receipt.parent_version_id else None
    )
    approved = await store.get_approved_version(name)
    evaluator_now = await gate.current_evaluator(receipt.evaluator.name) if receipt.evaluator else None
    cases = await gate.list_protected_cases(name)
    sets = await evidence_sets(
        store, name, receipt.candidate_version_id, receipt.parent_version_id, {c.task_id for c in cases}
    )
    evidence = await gate.list_evidence(receipt.receipt_id)
    policy = await gate.policy_or_default(name)
    canary = [e for e in evidence if e.kind == EvidenceKind.CANARY]
    basis = Basis(
        evaluator=f"{evaluator_now.name}@{evaluator_now.version}" if evaluator_now else None,
        parent=f"{receipt.parent_version_id}|approved={approved.version_id if approved else None}",
        train=train_snapshot(receipt.parent_version_id, sets).sha256,
        holdout=holdout_snapshot(receipt.candidate_version_id, receipt.parent_version_id, sets).sha256,
        protected=digest([c.model_dump(mode="json") for c in cases]),
        canary=canary[-1].body.task_digest if canary and canary[-1].body.kind == "canary" else None,
        **environment_basis(policy),
    )
    return CheckInputs(
        receipt=receipt,
        policy=policy,
        candidate=candidate,
        parent=parent,
        approved=approved,
        evaluator_now=evaluator_now,
        cases=cases,
        sets=sets,
        evidence=evidence,
        basis=basis,
        plan=await gate.get_plan(receipt.plan_id) if receipt.plan_id else None,
    )
