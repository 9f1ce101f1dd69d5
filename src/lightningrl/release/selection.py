"""Which rollouts are evidence for a candidate: train data bound to its parent, holdout and protected runs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from lightningstore import LightningStore, Rollout, RolloutMode
from lightningstore.gate import DataSnapshot

GATE_TAG = "gate"
"""Rollout metadata key of the gate's own rollouts (canary, rollback runs); they are never training data."""
EVAL_MODES = (RolloutMode.VAL, RolloutMode.TEST)


def task_id_of(rollout: Rollout) -> str:
    """The task a rollout ran: metadata `task_id`, else the input's, else its group or own id."""
    task_id = rollout.metadata.get("task_id")
    if task_id is None and isinstance(rollout.input, dict):
        task_id = rollout.input.get("task_id")
    return str(task_id or rollout.group_id or rollout.rollout_id)


@dataclass
class VersionIndex:
    """Caches resources_id -> the version of one resource name that the set binds."""

    store: LightningStore
    name: str
    _cache: dict[str, str | None] = field(default_factory=dict)

    async def version_of(self, rollout: Rollout) -> str | None:
        rid = rollout.resources_id
        if rid is None:
            return None
        if rid not in self._cache:
            found = await self.store.get_resources_by_id(rid)
            version = found.versions.get(self.name) if found is not None else None
            self._cache[rid] = version.version_id if version is not None else None
        return self._cache[rid]


async def bound_rollouts(
    store: LightningStore,
    index: VersionIndex,
    version_ids: Iterable[str | None],
    modes: Sequence[RolloutMode],
    *,
    finished_only: bool = True,
) -> dict[str, list[Rollout]]:
    """Rollouts of the given modes bound to each version (gate-tagged ones left out), by version."""
    wanted = {v for v in version_ids if v}
    out: dict[str, list[Rollout]] = {v: [] for v in wanted}
    for mode in modes:
        for rollout in await store.query_rollouts(mode=mode, sort_by="rollout_id"):
            if GATE_TAG in rollout.metadata or (finished_only and not rollout.status.terminal):
                continue
            version = await index.version_of(rollout)
            if version in wanted:
                out[version].append(rollout)
    return out


@dataclass
class EvidenceSets:
    """The rollouts one receipt rests on."""

    train: list[Rollout]
    holdout: dict[str, list[Rollout]]
    """version id -> holdout rollouts (candidate and parent)."""
    protected: dict[str, list[Rollout]]
    """version id -> rollouts on protected tasks (candidate and parent)."""

    def holdout_rollouts(self) -> list[Rollout]:
        return [r for rollouts in self.holdout.values() for r in rollouts]


async def evidence_sets(
    store: LightningStore,
    name: str,
    candidate_id: str,
    parent_id: str | None,
    protected_task_ids: set[str],
) -> EvidenceSets:
    """Train rollouts bound to the parent; val/test rollouts of candidate and parent, split by protected task."""
    index = VersionIndex(store, name)
    train = (await bound_rollouts(store, index, [parent_id], [RolloutMode.TRAIN])).get(parent_id or "", [])
    evals = await bound_rollouts(store, index, [candidate_id, parent_id], EVAL_MODES)
    holdout = {v: [r for r in rs if task_id_of(r) not in protected_task_ids] for v, rs in evals.items()}
    protected = {v: [r for r in rs if task_id_of(r) in protected_task_ids] for v, rs in evals.items()}
    return EvidenceSets(train=train, holdout=holdout, protected=protected)


def train_snapshot(parent_id: str | None, sets: EvidenceSets) -> DataSnapshot:
    return DataSnapshot.of(f"mode=train bound to {parent_id}", (r.rollout_id for r in sets.train))


def holdout_snapshot(candidate_id: str, parent_id: str | None, sets: EvidenceSets) -> DataSnapshot:
    selector = f"mode in (val, test) bound to {candidate_id} or {parent_id}, protected tasks excluded"
    return DataSnapshot.of(selector, (r.rollout_id for r in sets.holdout_rollouts()))
