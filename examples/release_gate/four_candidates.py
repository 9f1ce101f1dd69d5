"""The release gate on four candidates, from real store records.

Each candidate is a version with its exact parent, train and holdout rollouts (spans, rewards, retries),
protected-case runs, a real canary run (a Runner books rows into a SQLite ledger; a verifier reads them
back), a rollback drill and an authorised approval. The gate judges each one with its seven checks:

    A  passes all seven                                              -> PROMOTE TO BOUNDED CANARY
    B  +0.08, 83 of 120 rollouts with complete spans, 14 unexpected retries -> HOLD
    C  +0.10, 3 protected cases broken                               -> HOLD
    D  +0.07, 18 of 20 canary outcomes verified, parent unresolvable and untested -> HOLD

    python examples/release_gate/four_candidates.py            # the checks, candidate by candidate
    python examples/release_gate/four_candidates.py --json     # the same as JSON
    python examples/release_gate/four_candidates.py --db gate.db   # keep the store to inspect it
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ledger import ledger_agent, ledger_tasks, verify_row
from records import FULL, record_rollout

from lightningrl.release import (
    approve,
    build_receipt,
    check_receipt,
    drill_rollback,
    file_plan,
    run_canary,
    tasks_snapshot,
)
from lightningstore import LightningStore, PromptTemplate, ResourceVersion, SqlStore
from lightningstore.gate import (
    CanaryLimits,
    CheckName,
    Evaluator,
    GatePolicy,
    GateRecords,
    GateReport,
    ProtectedCase,
    gate_records,
)

NAME = "policy"
HOLDOUT = [f"hold-{i}" for i in range(10)]
PROTECTED = [f"prot-{i}" for i in range(5)]
PARENT_SCORE = 0.60


@dataclass(frozen=True)
class Candidate:
    """How one candidate's evidence looks."""

    label: str
    gain: float
    train: int = 40
    incomplete: int = 0
    unexpected_retries: int = 0
    expected_retries: int = 0
    protected_broken: int = 0
    sloppy: bool = False
    """Books 0 on the canary's two tricky tasks: 18 of 20 outcomes verify."""
    parent_missing: bool = False
    """The parent's artifact is gone and no rollback was ever drilled."""


CANDIDATES = [
    Candidate("A", gain=0.05),
    Candidate("B", gain=0.08, train=100, incomplete=37, unexpected_retries=14, expected_retries=3),
    Candidate("C", gain=0.10, protected_broken=3),
    Candidate("D", gain=0.07, sloppy=True, parent_missing=True),
]


async def setup(store: LightningStore, gate: GateRecords, root_dir: Path) -> ResourceVersion:
    """What an administrator sets before any training: evaluator, policy, protected cases, the root."""
    await gate.register_evaluator(Evaluator(name="exact-match", version="1"), recorded_by="admin:ops")
    policy = GatePolicy(
        resource_name=NAME,
        evaluator="exact-match",
        span_coverage=list(FULL),
        canary=CanaryLimits(max_tasks=20, max_seconds=120, max_tool_calls=100, max_cost=1.0),
    )  # retry_budget: zero unless the policy says otherwise
    await gate.put_policy(policy, recorded_by="admin:ops")
    for task_id in PROTECTED:
        case = ProtectedCase(resource_name=NAME, case_id=f"case-{task_id}", task_id=task_id)
        await gate.put_protected_case(case, recorded_by="admin:ops")
    root_dir.mkdir(parents=True, exist_ok=True)
    return await store.add_resource_version(NAME, PromptTemplate(template="root"), artifact=str(root_dir))


async def record_branch(
    store: LightningStore, gate: GateRecords, root: ResourceVersion, spec: Candidate, work: Path
) -> ResourceVersion:
    """Publish the parent; file the training plan (before training, as LightningRL does at start); publish
    the candidate; write their train, holdout and protected rollouts."""
    parent_dir = work / f"{spec.label}-parent"
    if not spec.parent_missing:
        parent_dir.mkdir(parents=True, exist_ok=True)
    parent = await store.add_resource_version(
        NAME,
        PromptTemplate(template=f"{spec.label} parent"),
        parent_id=root.version_id,
        artifact=str(parent_dir),
        created_by="lightningrl",
    )
    config = {"estimator": "grpo", "lr": 1e-3}
    plan = await file_plan(
        gate,
        NAME,
        parent.version_id,
        train=tasks_snapshot("train tasks", [f"train-{i}" for i in range(8)]),
        holdout=tasks_snapshot("holdout tasks", HOLDOUT),
        algorithm_config=config,
    )
    candidate = await store.add_resource_version(
        NAME,
        PromptTemplate(template=f"{spec.label} candidate" + (" sloppy" if spec.sloppy else "")),
        parent_id=parent.version_id,
        created_by="lightningrl",
        metadata={"step": 1, "algorithm_config": config, "plan_id": plan.plan_id},
    )
    pset = (await store.add_resource_set({NAME: parent.version_id})).resources_id
    cset = (await store.add_resource_set({NAME: candidate.version_id})).resources_id
    for i in range(spec.train):
        failures: tuple[str, ...] = ()
        retry_kind = None
        if i < spec.unexpected_retries:
            failures = ("timeout",)
        elif i < spec.unexpected_retries + spec.expected_retries:
            failures, retry_kind = ("failed",), "resample"
        await record_rollout(
            store,
            mode="train",
            resources_id=pset,
            task_id=f"train-{i % 8}",
            reward=float(i % 2),
            kinds=("agent", "reward") if i < spec.incomplete else FULL,
            failures=failures,
            retry_kind=retry_kind,
        )
    for task_id in HOLDOUT:
        await record_rollout(store, mode="val", resources_id=pset, task_id=task_id, reward=PARENT_SCORE)
        score = round(PARENT_SCORE + spec.gain, 6)
        await record_rollout(store, mode="val", resources_id=cset, task_id=task_id, reward=score)
    for i, task_id in enumerate(PROTECTED):
        await record_rollout(store, mode="test", resources_id=pset, task_id=task_id, reward=1.0)
        broken = i < spec.protected_broken
        await record_rollout(
            store, mode="test", resources_id=cset, task_id=task_id, reward=0.0 if broken else 1.0
        )
    return candidate


async def judge(
    store: LightningStore, gate: GateRecords, spec: Candidate, root: ResourceVersion, work: Path
) -> GateReport:
    """Receipt, canary run, rollback drill (unless the parent was never tested), approval, the seven checks."""
    candidate = await record_branch(store, gate, root, spec, work)
    receipt = await build_receipt(store, gate, candidate.version_id, created_by="algorithm:lightningrl")
    tasks = ledger_tasks(work / f"{spec.label}-ledger.db", spec.label)
    await run_canary(
        store,
        gate,
        receipt.receipt_id,
        ledger_agent,
        tasks,
        verify_row,
        workers=4,
        recorded_by="approver:ops",
    )
    if not spec.parent_missing:
        await drill_rollback(store, gate, receipt.receipt_id, recorded_by="approver:ops")
    await approve(store, gate, receipt.receipt_id, actor="alice", recorded_by="approver:alice")
    return await check_receipt(store, gate, receipt.receipt_id, recorded_by="approver:ops")


async def main(db: Path | None, work: Path) -> dict[str, GateReport]:
    store = SqlStore(db or work / "store.db")
    gate = gate_records(store)
    try:
        root = await setup(store, gate, work / "root")
        return {spec.label: await judge(store, gate, spec, root, work) for spec in CANDIDATES}
    finally:
        await store.close()


def as_json(reports: dict[str, GateReport]) -> dict[str, object]:
    return {
        label: {
            "candidate": report.candidate_version_id,
            "receipt": report.receipt_id,
            "verdict": report.verdict.value,
            "plan": report.check(CheckName.PINNED).evidence.get("plan_id"),
            "checks": [
                {"name": c.name.value, "status": c.status.value, "reason": c.reason, "evidence": c.evidence}
                for c in report.checks
            ],
        }
        for label, report in reports.items()
    }


def as_text(reports: dict[str, GateReport]) -> str:
    lines = []
    for label, report in reports.items():
        lines.append(f"candidate {label} ({report.candidate_version_id}): {report.verdict.value}")
        for check in report.checks:
            lines.append(f"  {check.status.value:<11} {check.name.value:<22} {check.reason}")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")
    parser.add_argument("--db", type=Path, help="SQLite file of the store (default: a temporary one)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="release-gate-") as tmp:
        reports = asyncio.run(main(args.db, Path(tmp)))
    print(json.dumps(as_json(reports), indent=2, default=str) if args.json else as_text(reports))
    sys.exit(0)
