"""File the training plan (the receipt's before-training part) when a run starts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from lightningrl.release.revision import code_revision
from lightningstore import LightningStore, ResourceVersion
from lightningstore.gate import DataSnapshot, GateRecords, PlanBody, TrainingPlan, digest

MAX_LINEAGE = 10_000


def tasks_snapshot(selector: str, tasks: Sequence[Any]) -> DataSnapshot:
    """A snapshot of task definitions (id and input), for data that exists before any rollout does."""
    return DataSnapshot.of(
        selector, [f"{getattr(t, 'task_id', '')}:{digest(getattr(t, 'input', t))}" for t in tasks]
    )


async def file_plan(
    gate: GateRecords,
    resource_name: str,
    parent_version_id: str,
    *,
    train: DataSnapshot,
    holdout: DataSnapshot,
    algorithm_config: dict[str, Any],
    scope: str = "default",
    created_by: str = "algorithm:lightningrl",
) -> TrainingPlan:
    """Freeze, before training, what the receipt's first part pins. The evaluator, retry budget, span
    coverage and approvers come from the resource's policy as it stands now, not from the learner."""
    policy = await gate.policy_or_default(resource_name)
    registered = await gate.current_evaluator(policy.evaluator) if policy.evaluator else None
    body = PlanBody(
        resource_name=resource_name,
        parent_version_id=parent_version_id,
        train=train,
        holdout=holdout,
        evaluator=registered.ref() if registered is not None else None,
        algorithm_config=algorithm_config,
        code_revision=code_revision(),
        scope=scope,
        retry_budget=policy.retry_budget,
        span_coverage=list(policy.span_coverage),
        canary_approvers=list(policy.canary_approvers),
        default_approvers=list(policy.default_approvers),
    )
    return await gate.add_plan(body, created_by=created_by)


class PlannedRun(Protocol):
    """What `file_run_plan` reads of an algorithm (LightningRL, APO)."""

    @property
    def store(self) -> LightningStore: ...
    @property
    def name(self) -> str: ...
    @property
    def train_tasks(self) -> Sequence[Any]: ...
    @property
    def val_tasks(self) -> Sequence[Any]: ...


async def file_run_plan(
    run: PlannedRun, resource_name: str, parent_version_id: str, algorithm_config: dict[str, Any]
) -> TrainingPlan:
    """`file_plan` for an algorithm's run on its store: its train and val tasks snapshotted, filed by
    `algorithm:<its name>`."""
    from lightningstore.gate import gate_records

    return await file_plan(
        gate_records(run.store),
        resource_name,
        parent_version_id,
        train=tasks_snapshot("train tasks", run.train_tasks),
        holdout=tasks_snapshot("val tasks", run.val_tasks),
        algorithm_config=algorithm_config,
        created_by=f"algorithm:{run.name}",
    )


async def descends_from(store: LightningStore, version: ResourceVersion, ancestor_id: str) -> bool:
    """Whether `ancestor_id` is `version`'s parent or an earlier ancestor."""
    current: ResourceVersion | None = version
    for _ in range(MAX_LINEAGE):
        if current is None or current.parent_id is None:
            return False
        if current.parent_id == ancestor_id:
            return True
        current = await store.get_resource_version(current.parent_id)
    return False


async def file_plan_id(
    run: PlannedRun, resource_name: str, parent_version_id: str, algorithm_config: dict[str, Any]
) -> str:
    """`file_run_plan`'s plan id: the `file_plan` hook `fit` installs on every algorithm it runs
    (`lightningrl.rl.hooks.PlanFiler`)."""
    return (await file_run_plan(run, resource_name, parent_version_id, algorithm_config)).plan_id
