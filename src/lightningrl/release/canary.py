"""Canary runs: the candidate on a bounded task set, every outcome checked at its destination."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lightningrl.release.bounded_run import bounded_run, succeeded
from lightningrl.release.inputs import load_inputs
from lightningrl.release.report import get_receipt
from lightningrl.release.verifier import CanaryTask, Verifier, verify
from lightningstore import LightningStore
from lightningstore.gate import (
    ENVIRONMENT_PARTS,
    CanaryLimits,
    CanaryOutcome,
    CanaryRun,
    EvidenceRecord,
    GateRecords,
    OutcomeSource,
    digest,
)
from runner import LitAgent


async def run_canary(
    store: LightningStore,
    gate: GateRecords,
    receipt_id: str,
    agent: LitAgent | Callable[..., Any],
    tasks: Sequence[CanaryTask],
    verifier: Verifier,
    *,
    limits: CanaryLimits | None = None,
    others: dict[str, str] | None = None,
    workers: int = 2,
    proxy_url: str | None = None,
    agent_key_secret: str | None = None,
    recorded_by: str = "local:unnamed",
) -> EvidenceRecord:
    """Run the receipt's candidate (bound with `others`, name -> version id) on the first `max_tasks` tasks
    with a Runner under the policy's (or given) limits, verify each outcome, and record the CanaryRun."""
    receipt = await get_receipt(gate, receipt_id)
    inputs = await load_inputs(store, gate, receipt)
    limits = limits or inputs.policy.canary
    planned = list(tasks)[: limits.max_tasks]
    bound = await store.add_resource_set(
        {**(others or {}), receipt.resource_name: receipt.candidate_version_id}
    )
    run = await bounded_run(
        store,
        agent,
        planned,
        limits,
        tag="canary",
        resources_id=bound.resources_id,
        production=False,
        workers=workers,
        proxy_url=proxy_url,
        agent_key_secret=agent_key_secret,
        metadata={"receipt_id": receipt.receipt_id},
    )
    outcomes: list[CanaryOutcome] = []
    for task in planned:
        rollout = run.rollouts.get(task.task_id)
        if not succeeded(rollout):
            why = (
                f"rollout {rollout.status.value}: {rollout.failure_reason or ''}" if rollout else "never ran"
            )
            if run.stopped_by:
                why += f" (run stopped by the {run.stopped_by} limit)"
            outcomes.append(
                CanaryOutcome(
                    task_id=task.task_id,
                    rollout_id=getattr(rollout, "rollout_id", None),
                    verified=False,
                    reason=why.strip(),
                )
            )
            continue
        assert rollout is not None
        found = await verify(verifier, task, rollout, store)
        outcomes.append(
            CanaryOutcome(
                task_id=task.task_id,
                rollout_id=rollout.rollout_id,
                verified=found.verified and found.source == OutcomeSource.VERIFIER,
                reason=found.reason,
                harmful=list(found.harmful),
                source=OutcomeSource(found.source),
                uncertainty=found.uncertainty,
            )
        )
    canary = CanaryRun(
        receipt_id=receipt.receipt_id,
        version_id=receipt.candidate_version_id,
        limits=limits,
        planned=[t.task_id for t in planned],
        outcomes=outcomes,
        stopped_by=run.stopped_by,
        tool_calls=run.tool_calls,
        cost=run.cost(limits),
        seconds=run.seconds,
        task_digest=digest([[t.task_id, t.input] for t in planned]),
        evaluator=inputs.basis.evaluator,
        environment={part: getattr(inputs.basis, part) for part in ENVIRONMENT_PARTS},
    )
    return await gate.add_evidence(canary, recorded_by=recorded_by)
