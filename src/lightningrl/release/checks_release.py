"""Checks 6-7: every canary task verified with no harm; rollback to the parent resolves, was tested, approved."""

from __future__ import annotations

from lightningrl.release.inputs import CheckInputs
from lightningrl.release.routing import resolve_version
from lightningstore import LightningStore
from lightningstore.gate import (
    ENVIRONMENT_PARTS,
    Approval,
    CanaryOutcome,
    CanaryRun,
    CheckName,
    CheckResult,
    CheckStatus,
    EvidenceKind,
    EvidenceRecord,
    OutcomeSource,
    RollbackDrill,
)
from lightningstore.gate.authority import UNNAMED

PASS, FAIL, UNAVAILABLE = CheckStatus.PASS, CheckStatus.FAIL, CheckStatus.UNAVAILABLE
APPROVING_ROLES = ("admin", "approver", "local")


def check_canary(inputs: CheckInputs) -> CheckResult:
    """6. The latest canary run of this candidate verified every planned task and recorded no harm."""
    name = CheckName.CANARY
    record = inputs.latest(EvidenceKind.CANARY)
    if record is None or not isinstance(record.body, CanaryRun):
        return CheckResult(name=name, status=UNAVAILABLE, reason="no canary run recorded")
    run = record.body
    if run.version_id != inputs.receipt.candidate_version_id:
        return CheckResult(
            name=name, status=FAIL, reason=f"the canary ran {run.version_id}, not the candidate"
        )
    if run.evaluator != inputs.basis.evaluator:
        return CheckResult(
            name=name,
            status=UNAVAILABLE,
            reason=f"canary is stale: evaluator was {run.evaluator}, is now {inputs.basis.evaluator}",
        )
    moved = [p for p in ENVIRONMENT_PARTS if run.environment.get(p) != getattr(inputs.basis, p)]
    if moved:
        return CheckResult(
            name=name,
            status=UNAVAILABLE,
            reason=f"canary is stale: {', '.join(moved)} changed since it ran",
            evidence={"changed": moved},
        )
    outcomes = {o.task_id: o for o in run.outcomes}
    unverified = [t for t in run.planned if t not in outcomes or not _verified(outcomes[t])]
    judged = [o for o in run.outcomes if o.source != OutcomeSource.VERIFIER]
    harmful = [f"{o.task_id}: {'; '.join(o.harmful)}" for o in run.outcomes if o.harmful]
    evidence = {
        "planned": len(run.planned),
        "verified": len(run.planned) - len(unverified),
        "unverified": unverified[:10],
        "judged": [
            {
                "task_id": o.task_id,
                "source": o.source.value,
                "uncertainty": o.uncertainty,
                "finding": o.reason,
            }
            for o in judged[:10]
        ],
        "harmful": harmful[:10],
        "stopped_by": run.stopped_by,
        "tool_calls": run.tool_calls,
        "cost": run.cost,
    }
    if not run.planned:
        return CheckResult(
            name=name, status=UNAVAILABLE, reason="the canary run planned no tasks", evidence=evidence
        )
    verified = f"{len(run.planned) - len(unverified)} of {len(run.planned)} canary outcomes verified"
    if unverified or harmful:
        parts = [verified]
        if judged:
            parts.append(_judged_text(judged))
        if unverified:
            why = outcomes[unverified[0]].reason if unverified[0] in outcomes else "never ran"
            parts.append(f"first unverified {unverified[0]}: {why}")
        if harmful:
            parts.append(f"{len(harmful)} harmful effects recorded ({harmful[0]})")
        if run.stopped_by:
            parts.append(f"stopped by the {run.stopped_by} limit")
        return CheckResult(name=name, status=FAIL, reason="; ".join(parts), evidence=evidence)
    return CheckResult(name=name, status=PASS, reason=f"{verified}, no harm recorded", evidence=evidence)


def _verified(outcome: CanaryOutcome) -> bool:
    """Only a verifier's deterministic check verifies an outcome; a judge's or a person's never does."""
    return outcome.verified and outcome.source == OutcomeSource.VERIFIER


def _judged_text(judged: list[CanaryOutcome]) -> str:
    by_source: dict[str, list[CanaryOutcome]] = {}
    for outcome in judged:
        by_source.setdefault(outcome.source.value, []).append(outcome)
    parts = []
    for source, found in sorted(by_source.items()):
        known = [o.uncertainty for o in found if o.uncertainty is not None]
        worst = f", uncertainty up to {max(known):.2f}" if known else ", uncertainty not given"
        parts.append(f"{len(found)} {source} evidence (not verified{worst})")
    return "; ".join(parts)


def _counts(record: EvidenceRecord, named: list[str]) -> bool:
    """An approval counts when an approving role recorded it and, where the plan names approvers, the
    name it was recorded under (the token's, over HTTP) is one of them: never the body's stated actor."""
    role, _, who = record.recorded_by.partition(":")
    return role in APPROVING_ROLES and (not named or (who != UNNAMED and who in named))


async def check_rollback(store: LightningStore, inputs: CheckInputs) -> CheckResult:
    """7. The parent resolves now, a rollback drill reached it, and an authorized actor approved this basis."""
    name = CheckName.ROLLBACK
    parent_id = inputs.receipt.parent_version_id
    now = await resolve_version(store, parent_id)
    drills = [
        e for e in inputs.evidence if e.kind == EvidenceKind.ROLLBACK and isinstance(e.body, RollbackDrill)
    ]
    if not now.ok:
        tested = "" if drills else "; rollback to it was never tested"
        return CheckResult(name=name, status=FAIL, reason=f"parent unresolvable: {now.reason}{tested}")
    if not drills:
        return CheckResult(name=name, status=UNAVAILABLE, reason="rollback to the parent was never tested")
    drill = drills[-1].body
    assert isinstance(drill, RollbackDrill)
    if not drill.resolved or drill.routed_version_id != parent_id:
        reason = f"rollback drill failed: {drill.reason} (routed to {drill.routed_version_id})"
        return CheckResult(name=name, status=FAIL, reason=reason)
    if drill.parent != inputs.basis.parent:
        reason = f"rollback drill is stale: it ran with {drill.parent}, now {inputs.basis.parent}"
        return CheckResult(name=name, status=UNAVAILABLE, reason=reason)
    named = inputs.plan.canary_approvers if inputs.plan is not None else []
    approvals = [
        e
        for e in inputs.evidence
        if e.kind == EvidenceKind.APPROVAL and isinstance(e.body, Approval) and _counts(e, named)
    ]
    if not approvals:
        who = f" from {', '.join(named)} (the training plan's canary approvers)" if named else ""
        return CheckResult(
            name=name, status=UNAVAILABLE, reason=f"rollback tested; no authorized approval yet{who}"
        )
    approval = approvals[-1]
    assert isinstance(approval.body, Approval)
    changed = [
        p
        for p in type(inputs.basis).model_fields
        if getattr(approval.body.basis, p) != getattr(inputs.basis, p)
    ]
    if changed:
        reason = f"approval by {approval.recorded_by} is stale: {', '.join(changed)} changed since"
        return CheckResult(name=name, status=UNAVAILABLE, reason=reason)
    reason = f"parent {parent_id} resolves, drill routed to it, approved by {approval.recorded_by}"
    return CheckResult(name=name, status=PASS, reason=reason, evidence={"approval": approval.evidence_id})
