"""Build an update receipt for a candidate version from store records."""

from __future__ import annotations

from lightningrl.release.revision import code_revision
from lightningrl.release.selection import evidence_sets, holdout_snapshot, train_snapshot
from lightningstore import LightningStore, NotFoundError
from lightningstore.gate import PLAN_FIELDS, GateRecords, ReceiptBody, UpdateReceipt


async def build_receipt(
    store: LightningStore,
    gate: GateRecords,
    candidate_version_id: str,
    *,
    evaluator: str | None = None,
    scope: str = "default",
    retry_budget: int | None = None,
    span_coverage: list[str] | None = None,
    created_by: str = "local:unnamed",
) -> UpdateReceipt:
    """Pin the candidate, its exact parent, the data snapshots, the current evaluator version, the algorithm
    config (from the version's metadata), the code revision, scope, retry budget and span coverage; store it.

    `evaluator` names a registered evaluator (default: the policy's); unknown or none leaves it unpinned,
    which the pinned-identity check reports as unavailable. Budget and coverage default to the policy's.
    A candidate whose metadata names the training plan its run filed before training (`plan_id`) gets
    that plan's evaluator, config, code revision, scope, budget and coverage unchanged, whatever is
    passed here.
    """
    candidate = await store.get_resource_version(candidate_version_id)
    if candidate is None:
        raise NotFoundError("resource version", candidate_version_id)
    policy = await gate.policy_or_default(candidate.name)
    cases = await gate.list_protected_cases(candidate.name)
    sets = await evidence_sets(
        store, candidate.name, candidate.version_id, candidate.parent_id, {c.task_id for c in cases}
    )
    evaluator_name = evaluator or policy.evaluator
    registered = await gate.current_evaluator(evaluator_name) if evaluator_name else None
    plan_id = candidate.metadata.get("plan_id")
    plan = await gate.get_plan(str(plan_id)) if plan_id else None
    body = ReceiptBody(
        resource_name=candidate.name,
        candidate_version_id=candidate.version_id,
        parent_version_id=candidate.parent_id,
        train=train_snapshot(candidate.parent_id, sets),
        holdout=holdout_snapshot(candidate.version_id, candidate.parent_id, sets),
        evaluator=registered.ref() if registered is not None else None,
        algorithm_config=dict(candidate.metadata.get("algorithm_config") or {}),
        code_revision=str(candidate.metadata.get("code_revision") or code_revision()),
        scope=scope,
        retry_budget=policy.retry_budget if retry_budget is None else retry_budget,
        span_coverage=list(policy.span_coverage if span_coverage is None else span_coverage),
        plan_id=str(plan_id) if plan_id else None,
    )
    if plan is not None:  # the before-training part is the plan's, as frozen: only the rest is appended
        body = body.model_copy(update={field: getattr(plan, field) for field in PLAN_FIELDS})
    return await gate.add_receipt(body, created_by=created_by)
