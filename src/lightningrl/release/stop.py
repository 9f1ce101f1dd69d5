"""Stop conditions for the training loop: pause on dropped span coverage, retry debt, or protected regressions."""

from __future__ import annotations

from lightningrl.release.checks_data import coverage_gaps, retry_counts
from lightningrl.release.rewards import task_means
from lightningrl.release.selection import GATE_TAG, evidence_sets
from lightningstore import LightningStore, RolloutMode
from lightningstore.gate import GatePolicy, GateRecords, gate_records

TOLERANCE = 1e-9


async def stop_reason(
    store: LightningStore,
    resource_name: str,
    *,
    gate: GateRecords | None = None,
    policy: GatePolicy | None = None,
) -> str | None:
    """Why the loop should pause now, or None. Looks at the policy's window of most recent finished train
    rollouts (coverage and unexpected retries against the policy's bounds) and at the protected cases of
    the resource's `latest` version against its parent. Call it after each step."""
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
    return "; ".join(reasons) or None


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
