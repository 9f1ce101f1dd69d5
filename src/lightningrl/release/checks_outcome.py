"""Checks 4-5: the candidate beats its exact parent on the locked holdout; no protected case regresses."""

from __future__ import annotations

from lightningrl.release.inputs import CheckInputs
from lightningrl.release.rewards import task_means
from lightningstore import LightningStore
from lightningstore.gate import CheckName, CheckResult, CheckStatus

PASS, FAIL, UNAVAILABLE = CheckStatus.PASS, CheckStatus.FAIL, CheckStatus.UNAVAILABLE
TOLERANCE = 1e-9


async def check_holdout(store: LightningStore, inputs: CheckInputs) -> CheckResult:
    """4. Mean score on the holdout tasks both versions ran: candidate - parent > policy.min_holdout_gain."""
    r = inputs.receipt
    name = CheckName.HOLDOUT
    if r.evaluator is None or r.parent_version_id is None:
        return CheckResult(name=name, status=UNAVAILABLE, reason="no evaluator or no parent pinned")
    reward = r.evaluator.reward_name
    cand, cand_missing = await task_means(store, inputs.sets.holdout.get(r.candidate_version_id, []), reward)
    par, par_missing = await task_means(store, inputs.sets.holdout.get(r.parent_version_id, []), reward)
    common = sorted(set(cand) & set(par))
    evidence = {"tasks": len(common), "unscored_rollouts": cand_missing + par_missing}
    if len(common) < inputs.policy.min_holdout_tasks:
        reason = (
            f"holdout evidence missing: {len(common)} tasks scored for both candidate and parent "
            f"(candidate {len(cand)}, parent {len(par)}; need {inputs.policy.min_holdout_tasks})"
        )
        return CheckResult(name=name, status=UNAVAILABLE, reason=reason, evidence=evidence)
    cand_mean = sum(cand[t] for t in common) / len(common)
    par_mean = sum(par[t] for t in common) / len(common)
    gain = cand_mean - par_mean
    evidence.update({"candidate": cand_mean, "parent": par_mean, "gain": gain})
    margin = inputs.policy.min_holdout_gain
    text = f"candidate {cand_mean:.3f} vs parent {par_mean:.3f} on {len(common)} holdout tasks (gain {gain:+.3f})"
    if gain > margin + TOLERANCE:
        return CheckResult(name=name, status=PASS, reason=text, evidence=evidence)
    return CheckResult(name=name, status=FAIL, reason=f"{text}, needs > {margin:+.3f}", evidence=evidence)


async def check_protected(store: LightningStore, inputs: CheckInputs) -> CheckResult:
    """5. On every protected case the candidate scores at least its parent (and the case's floor)."""
    r = inputs.receipt
    name = CheckName.PROTECTED
    if not inputs.cases:
        return CheckResult(
            name=name, status=UNAVAILABLE, reason=f"no protected cases for {r.resource_name!r}"
        )
    if r.evaluator is None or r.parent_version_id is None:
        return CheckResult(name=name, status=UNAVAILABLE, reason="no evaluator or no parent pinned")
    reward = r.evaluator.reward_name
    cand, _ = await task_means(store, inputs.sets.protected.get(r.candidate_version_id, []), reward)
    par, _ = await task_means(store, inputs.sets.protected.get(r.parent_version_id, []), reward)
    broken: list[str] = []
    unscored: list[str] = []
    for case in inputs.cases:
        if case.task_id not in cand or case.task_id not in par:
            unscored.append(case.case_id)
            continue
        below_floor = case.min_reward is not None and cand[case.task_id] < case.min_reward - TOLERANCE
        if cand[case.task_id] < par[case.task_id] - TOLERANCE or below_floor:
            broken.append(case.case_id)
    evidence = {"cases": len(inputs.cases), "broken": broken, "unscored": unscored}
    if broken:
        reason = f"{len(broken)} of {len(inputs.cases)} protected cases regress: {', '.join(broken)}"
        return CheckResult(name=name, status=FAIL, reason=reason, evidence=evidence)
    if unscored:
        reason = f"{len(unscored)} protected cases lack candidate or parent runs: {', '.join(unscored[:5])}"
        return CheckResult(name=name, status=UNAVAILABLE, reason=reason, evidence=evidence)
    return CheckResult(
        name=name,
        status=PASS,
        reason=f"none of {len(inputs.cases)} protected cases regress",
        evidence=evidence,
    )
