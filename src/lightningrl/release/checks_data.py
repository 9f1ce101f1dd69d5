"""Checks 1-3: pinned identity, span coverage of every finished rollout, unexpected retry debt."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from lightningrl.release.inputs import CheckInputs
from lightningrl.release.plan_filing import descends_from
from lightningrl.release.selection import holdout_snapshot, train_snapshot
from lightningrl.release.spans import KIND_ATTRIBUTES, kinds_of
from lightningstore import LightningStore, Rollout, spans_of_rollouts
from lightningstore.gate import PLAN_FIELDS, CheckName, CheckResult, CheckStatus

PASS, FAIL, UNAVAILABLE = CheckStatus.PASS, CheckStatus.FAIL, CheckStatus.UNAVAILABLE
EXAMPLES = 5


async def check_plan(store: LightningStore, inputs: CheckInputs) -> str | None:
    """Why the receipt's before-training part does not stand (None when it does, or no plan is needed)."""
    r = inputs.receipt
    if r.plan_id is None:
        return "no training plan was filed before training" if inputs.policy.require_plan else None
    plan = inputs.plan
    if plan is None:
        return f"training plan {r.plan_id} is not stored"
    rewritten = [f for f in PLAN_FIELDS if getattr(r, f) != getattr(plan, f)]
    if rewritten:
        return f"the receipt rewrote its training plan {plan.plan_id}: {', '.join(rewritten)} differ"
    if inputs.candidate is not None and not await descends_from(
        store, inputs.candidate, plan.parent_version_id
    ):
        return f"candidate {r.candidate_version_id} does not descend from the plan's parent {plan.parent_version_id}"
    return None


async def check_pinned(store: LightningStore, inputs: CheckInputs) -> CheckResult:
    """1. Candidate, exact parent, data snapshots and evaluator are pinned and still what the receipt says."""
    r = inputs.receipt
    name = CheckName.PINNED

    def result(status: CheckStatus, reason: str) -> CheckResult:
        evidence = {"receipt_id": r.receipt_id, "plan_id": r.plan_id}
        return CheckResult(name=name, status=status, reason=reason, evidence=evidence)

    if inputs.candidate is None or inputs.candidate.name != r.resource_name:
        return result(
            FAIL, f"candidate {r.candidate_version_id!r} is not a stored version of {r.resource_name!r}"
        )
    if r.parent_version_id is None or inputs.parent is None:
        return result(UNAVAILABLE, f"candidate {r.candidate_version_id} has no stored parent version")
    if inputs.candidate.parent_id != r.parent_version_id:
        return result(
            FAIL, f"candidate's parent is {inputs.candidate.parent_id}, receipt pins {r.parent_version_id}"
        )
    broken_plan = await check_plan(store, inputs)
    if broken_plan is not None:
        return result(UNAVAILABLE if r.plan_id is None else FAIL, broken_plan)
    if r.evaluator is None:
        return result(UNAVAILABLE, "no evaluator pinned (register one and name it in the policy or receipt)")
    if inputs.evaluator_now is None or inputs.evaluator_now.version != r.evaluator.version:
        now = (
            f"{inputs.evaluator_now.name}@{inputs.evaluator_now.version}" if inputs.evaluator_now else "none"
        )
        return result(
            FAIL, f"evaluator changed since the receipt: pinned {r.evaluator}, registered now {now}"
        )
    train = train_snapshot(r.parent_version_id, inputs.sets)
    holdout = holdout_snapshot(r.candidate_version_id, r.parent_version_id, inputs.sets)
    if r.train.count == 0:
        return result(UNAVAILABLE, f"no finished train rollouts bound to the parent {r.parent_version_id}")
    for label, pinned, live in (("train", r.train, train), ("holdout", r.holdout, holdout)):
        if pinned.sha256 != live.sha256:
            return result(
                FAIL,
                f"{label} data changed since the receipt: pinned {pinned.count} rollouts "
                f"({pinned.sha256[:12]}), now {live.count} ({live.sha256[:12]})",
            )
    return result(
        PASS,
        f"candidate {r.candidate_version_id} <- parent {r.parent_version_id}, evaluator {r.evaluator}, "
        f"train {r.train.count} and holdout {r.holdout.count} rollouts as pinned",
    )


async def check_coverage(store: LightningStore, inputs: CheckInputs) -> CheckResult:
    """2. Every finished train and holdout rollout has the declared span kinds (in its latest attempt)."""
    declared = set(inputs.receipt.span_coverage)
    rollouts = inputs.sets.train + inputs.sets.holdout_rollouts()
    name = CheckName.COVERAGE
    if not declared:
        return CheckResult(name=name, status=UNAVAILABLE, reason="the receipt declares no span coverage")
    if not rollouts:
        return CheckResult(name=name, status=UNAVAILABLE, reason="no finished rollouts to check")
    incomplete, missing_by_kind = await coverage_gaps(store, rollouts, declared)
    complete = len(rollouts) - len(incomplete)
    evidence = {
        "declared": sorted(declared),
        "complete": complete,
        "finished": len(rollouts),
        "missing_by_kind": dict(missing_by_kind),
        "incomplete_examples": incomplete[:EXAMPLES],
    }
    if incomplete:
        kinds = ", ".join(f"{k} x{n}" for k, n in sorted(missing_by_kind.items()))
        reason = f"{complete} of {len(rollouts)} finished rollouts have complete spans (missing: {kinds})"
        return CheckResult(name=name, status=FAIL, reason=reason, evidence=evidence)
    reason = f"all {len(rollouts)} finished rollouts have {sorted(declared)}"
    return CheckResult(name=name, status=PASS, reason=reason, evidence=evidence)


async def check_retry_debt(store: LightningStore, inputs: CheckInputs) -> CheckResult:
    """3. Unexpected retries (not declared resampling) of train and holdout rollouts stay within budget."""
    rollouts = inputs.sets.train + inputs.sets.holdout_rollouts()
    markers = inputs.policy.expected_retry_markers
    budget = inputs.receipt.retry_budget
    name = CheckName.RETRY_DEBT
    if not rollouts:
        return CheckResult(name=name, status=UNAVAILABLE, reason="no finished rollouts to check")
    expected, unexpected, reasons, examples = await retry_counts(store, rollouts, markers)
    evidence = {
        "unexpected": unexpected,
        "expected": expected,
        "budget": budget,
        "by_failure": dict(reasons),
        "examples": examples,
    }
    summary = f"{unexpected} unexpected retries (budget {budget}), {expected} expected resamples"
    status = PASS if unexpected <= budget else FAIL
    return CheckResult(name=name, status=status, reason=summary, evidence=evidence)


async def coverage_gaps(
    store: LightningStore, rollouts: Sequence[Rollout], declared: set[str]
) -> tuple[list[str], Counter[str]]:
    """Rollouts whose latest attempt lacks a declared span kind, and how often each kind is missing.

    Reads names and the attributes a kind depends on only (not token ids), in batches."""
    missing_by_kind: Counter[str] = Counter()
    incomplete: list[str] = []
    spans = await spans_of_rollouts(
        store, [r.rollout_id for r in rollouts], "latest", attributes=KIND_ATTRIBUTES
    )
    for rollout in rollouts:
        missing = declared - kinds_of(spans[rollout.rollout_id])
        if missing:
            incomplete.append(rollout.rollout_id)
            missing_by_kind.update(missing)
    return incomplete, missing_by_kind


async def retry_counts(
    store: LightningStore, rollouts: Sequence[Rollout], markers: Sequence[str]
) -> tuple[int, int, Counter[str], list[dict[str, Any]]]:
    """(expected, unexpected) retries, unexpected ones by the failure before them, and a few examples
    with the reason kept. A retry is expected when its `retry_kind` or the failure before it has a marker."""
    expected, unexpected = 0, 0
    reasons: Counter[str] = Counter()
    examples: list[dict[str, Any]] = []
    for rollout in rollouts:
        if rollout.num_attempts <= 1:
            continue
        attempts = await store.query_attempts(rollout.rollout_id)
        for previous, retry in zip(attempts, attempts[1:], strict=False):
            why = f"{previous.status.value}: {previous.failure_reason or 'no reason recorded'}"
            kind = str(retry.metadata.get("retry_kind", ""))
            if any(m in kind or m in (previous.failure_reason or "") for m in markers):
                expected += 1
                continue
            unexpected += 1
            reasons[previous.status.value] += 1
            if len(examples) < EXAMPLES:
                examples.append(
                    {"rollout_id": rollout.rollout_id, "attempt_id": retry.attempt_id, "after": why}
                )
    return expected, unexpected, reasons, examples
