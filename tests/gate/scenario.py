"""Candidates built from real store records: a parent and a candidate per branch, with their evidence."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ledger import ledger_agent, ledger_tasks, verify_row
from records import FULL, record_rollout

from lightningrl.release import build_receipt, drill_rollback, run_canary
from lightningstore import LightningStore, PromptTemplate, ResourceVersion
from lightningstore.gate import CanaryLimits, Evaluator, GatePolicy, GateRecords, ProtectedCase, UpdateReceipt

NAME = "policy"
PROTECTED = [f"prot-{i}" for i in range(5)]
HOLDOUT = [f"hold-{i}" for i in range(10)]


@dataclass(frozen=True)
class Spec:
    """How one branch's evidence looks."""

    label: str
    train: int = 40
    incomplete: int = 0
    unexpected_retries: int = 0
    expected_retries: int = 0
    parent_holdout: float = 0.5
    candidate_holdout: float = 0.8
    protected_broken: int = 0
    sloppy: bool = False
    parent_missing: bool = False
    plan_id: str | None = None
    """The training plan the candidate's run filed before training (its metadata names it)."""


@dataclass
class Branch:
    spec: Spec
    parent: ResourceVersion
    candidate: ResourceVersion
    receipt: UpdateReceipt | None = None


async def setup_gate(store: LightningStore, gate: GateRecords, root_dir: Path) -> ResourceVersion:
    """Evaluator, policy, protected cases and the approved root version."""
    await gate.register_evaluator(Evaluator(name="exact-match", version="1"), recorded_by="local:admin")
    limits = CanaryLimits(max_tasks=20, max_seconds=60, max_tool_calls=100, max_cost=1.0)
    policy = GatePolicy(resource_name=NAME, evaluator="exact-match", span_coverage=list(FULL), canary=limits)
    await gate.put_policy(policy, recorded_by="local:admin")
    for task_id in PROTECTED:
        case = ProtectedCase(resource_name=NAME, case_id=f"case-{task_id}", task_id=task_id)
        await gate.put_protected_case(case, recorded_by="local:admin")
    root_dir.mkdir(parents=True, exist_ok=True)
    return await store.add_resource_version(NAME, PromptTemplate(template="root"), artifact=str(root_dir))


def _holdout_reward(mean: float, i: int) -> float:
    """Rewards in {0, 1} whose mean over HOLDOUT is `mean` (rounded to tenths)."""
    return 1.0 if i < round(mean * len(HOLDOUT)) else 0.0


async def build_branch(store: LightningStore, root: ResourceVersion, spec: Spec, tmp: Path) -> Branch:
    """Publish parent and candidate and write their train, holdout and protected rollouts."""
    parent_dir = tmp / f"{spec.label}-parent"
    if not spec.parent_missing:
        parent_dir.mkdir(parents=True)
    parent = await store.add_resource_version(
        NAME,
        PromptTemplate(template=f"{spec.label} parent"),
        parent_id=root.version_id,
        artifact=str(parent_dir),
        created_by="lightningrl",
    )
    template = f"{spec.label} candidate" + (" sloppy" if spec.sloppy else "")
    candidate = await store.add_resource_version(
        NAME,
        PromptTemplate(template=template),
        parent_id=parent.version_id,
        created_by="lightningrl",
        metadata={
            "step": 1,
            "algorithm_config": {"estimator": "grpo", "lr": 1e-3},
            **({"plan_id": spec.plan_id} if spec.plan_id else {}),
        },
    )
    pset = (await store.add_resource_set({NAME: parent.version_id})).resources_id
    cset = (await store.add_resource_set({NAME: candidate.version_id})).resources_id
    for i in range(spec.train):
        kinds = ("agent", "reward") if i < spec.incomplete else FULL
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
            kinds=kinds,
            failures=failures,
            retry_kind=retry_kind,
        )
    for i, task_id in enumerate(HOLDOUT):
        await record_rollout(
            store,
            mode="val",
            resources_id=pset,
            task_id=task_id,
            reward=_holdout_reward(spec.parent_holdout, i),
        )
        await record_rollout(
            store,
            mode="val",
            resources_id=cset,
            task_id=task_id,
            reward=_holdout_reward(spec.candidate_holdout, i),
        )
    for i, task_id in enumerate(PROTECTED):
        await record_rollout(store, mode="test", resources_id=pset, task_id=task_id, reward=1.0)
        broken = i < spec.protected_broken
        await record_rollout(
            store, mode="test", resources_id=cset, task_id=task_id, reward=0.0 if broken else 1.0
        )
    return Branch(spec, parent, candidate)


async def gather_evidence(
    store: LightningStore, gate: GateRecords, branch: Branch, tmp: Path
) -> UpdateReceipt:
    """Receipt, a real canary run (Runner + ledger agent + verifier), and a rollback drill."""
    receipt = await build_receipt(store, gate, branch.candidate.version_id, created_by="local:test")
    tasks = ledger_tasks(tmp / f"{branch.spec.label}-ledger.db", branch.spec.label)
    await run_canary(store, gate, receipt.receipt_id, ledger_agent, tasks, verify_row, workers=4)
    await drill_rollback(store, gate, receipt.receipt_id)
    branch.receipt = receipt
    return receipt
