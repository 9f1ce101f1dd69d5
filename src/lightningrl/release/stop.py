"""Stop conditions for the training loop: pause on dropped span coverage, retry debt, protected
regressions, a parent that no longer resolves, or a canary that cannot verify its external effects."""

from __future__ import annotations

from typing import Any

from lightningrl.release.checks_data import coverage_gaps, retry_counts
from lightningrl.release.rewards import task_means
from lightningrl.release.routing import resolve_version
from lightningrl.release.selection import GATE_TAG, evidence_sets
from lightningstore import LightningStore, RolloutMode
from lightningstore.gate import CanaryRun, EvidenceKind, GatePolicy, GateRecords, OutcomeSource, gate_records

TOLERANCE = 1e-9


async def gate_stop_check(run: Any) -> str | None:
    """`stop_reason` for a training loop's resource: the `stop_check` hook `fit` installs on a
    `LightningRL` when `config.gate_stop` is set (`lightningrl.rl.hooks.StopCheck`)."""
    return await stop_reason(run.store, run.config.resource_name)


async def stop_reason(
    store: LightningStore,
    resource_name: str,
    *,
    gate: GateRecords | None = None,
    policy: GatePolicy | None = None,
) -> str | None:
    """Why the loop should pause now, or None. Looks at the policy's window of most recent finished train
    rollouts (coverage and unexpected retries against the policy's bounds) and at the protected cases of
    the resource's `latest` version against its parent; whether that parent still resolves; and whether
    the latest canary of `latest` verified every external effect it planned. Call it after each step."""
    gate = gate or gate_records(store)
    policy = policy or await gate.policy_or_default(resource_name)
    finished = await store.query_rollouts(
        status=["succeeded", "failed"],
        mode=RolloutMode.TRAIN,
        sort_by="end_time",
        descending=True,
        limit=policy.stop.window,
    )
    recent = [r for r in finished if GATE_TAG not in r.metadata]
    reasons: list[str] = []
    if recent and policy.span_coverage:
        incomplete, missing = await coverage_gaps(store, recent, set(policy.span_coverage))
        coverage = 1 - len(incomplete) / len(recent)
        if coverage < policy.stop.min_span_coverage:
            kinds = ", ".join(sorted(missing))
            reasons.append(
                f"span coverage dropped to {coverage:.2f} (< {policy.stop.min_span_coverage:.2f}) over the last "
                f"{len(recent)} finished train rollouts (missing {kinds})"
            )
    if recent:
        _, unexpected, _, _ = await retry_counts(store, recent, policy.expected_retry_markers)
        if unexpected > policy.retry_budget:
            reasons.append(f"retry debt {unexpected} crossed its bound {policy.retry_budget}")
    regressed = await _protected_regressions(store, gate, resource_name)
    if regressed:
        reasons.append(f"protected cases regress on the latest version: {', '.join(regressed)}")
    latest = await store.get_latest_version(resource_name)
    if latest is not None and latest.parent_id is not None:
        parent = await resolve_version(store, latest.parent_id)
        if not parent.ok:
            reasons.append(f"the parent of the latest version is unavailable: {parent.reason}")
    if latest is not None:
        unverifiable = await _unverifiable_canary(gate, latest.version_id)
        if unverifiable:
            reasons.append(unverifiable)
    return "; ".join(reasons) or None


async def _unverifiable_canary(gate: GateRecords, version_id: str) -> str | None:
    """Why the latest canary of `version_id` could not verify its external effects, or None."""
    runs = [
        e.body
        for receipt in await gate.list_receipts(candidate_version_id=version_id)
        for e in await gate.list_evidence(receipt.receipt_id, EvidenceKind.CANARY)
        if isinstance(e.body, CanaryRun)
    ]
    if not runs:
        return None
    run = runs[-1]
    verified = {o.task_id for o in run.outcomes if o.verified and o.source == OutcomeSource.VERIFIER}
    missing = [t for t in run.planned if t not in verified]
    if not missing:
        return None
    first = next((o for o in run.outcomes if o.task_id == missing[0]), None)
    why = f"{first.source.value}: {first.reason}" if first else "never ran"
    return (
        f"the canary of the latest version cannot verify {len(missing)} of {len(run.planned)} external "
        f"effects (first {missing[0]}: {why})"
    )


async def _protected_regressions(store: LightningStore, gate: GateRecords, name: str) -> list[str]:
    latest = await store.get_latest_version(name)
    cases = await gate.list_protected_cases(name)
    if latest is None or latest.parent_id is None or not cases:
        return []
    sets = await evidence_sets(store, name, latest.version_id, latest.parent_id, {c.task_id for c in cases})
    cand, _ = await task_means(store, sets.protected.get(latest.version_id, []), "reward")
    par, _ = await task_means(store, sets.protected.get(latest.parent_id, []), "reward")
    return [
        c.case_id
        for c in cases
        if c.task_id in cand and c.task_id in par and cand[c.task_id] < par[c.task_id] - TOLERANCE
    ]
