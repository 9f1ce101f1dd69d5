"""Continuous learning on traffic others enqueue: what to poll, what is fresh enough, how to baseline it.

`ContinuousConfig` is the policy `LightningRL.run_continuous` follows; `RolloutFeed` reads finished
train rollouts incrementally (newest first, back to a time cursor: a poll costs the new rollouts, not a
scan of every succeeded one); `VersionLineage` says how many publishes separate the version that sampled
a rollout from the one being trained, so transitions from versions older than `max_staleness` are
skipped and counted rather than trained on as if they were on-policy.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from lightningrl.credit.calls import is_llm_span
from lightningrl.rl.baseline import RUNNING_BASELINES
from lightningstore import LightningStore, ResourceVersion, Rollout, Span, semconv

TRAINED_MARK = "lightningrl.trained_step"
"""Rollout metadata: the continuous step that consumed the rollout (trained on it, or skipped it)."""
SKIPPED_MARK = "lightningrl.skipped"
"""Rollout metadata: why a consumed rollout was not trained on ("stale", "unversioned")."""
CONTINUOUS_BASELINES = (*RUNNING_BASELINES, "batch", "group")
CUTOFF_KEY = "continuous"
"""The key of the block `run_continuous` records on each version it publishes (`data_cutoff` etc.)."""


@dataclass(frozen=True)
class ContinuousConfig:
    """How `run_continuous` learns from rollouts it did not enqueue."""

    baseline: str = "running_task"
    """"running_task": each call against a running mean of its task's past values (the rollout's
    group id, else a hash of its input); "running_global": against one running mean; "batch":
    REINFORCE++ (verl's, whitened over the batch); "group": GRPO over group ids (traffic that comes in
    groups). The first three need no groups."""
    baseline_decay: float = 0.9
    """Weight of the old mean when a running baseline folds in a batch."""
    max_staleness: int | None = 2
    """Train only on rollouts sampled by a version at most this many publishes behind the one being
    trained (0: only by it). Older ones, and ones whose version cannot be told, are skipped and
    counted (`continuous/skipped_stale`, `continuous/skipped_unversioned`). None trains on any."""
    page_size: int = 256
    """Rollouts per read when polling (newest first, until the cursor is reached)."""
    lookback_seconds: float = 5.0
    """How far before the cursor a poll still looks (finish times written by several store servers
    may disagree a little); rollouts already seen there are recognised by id."""

    def __post_init__(self) -> None:
        if self.baseline not in CONTINUOUS_BASELINES:
            raise ValueError(
                f"continuous baseline must be one of {CONTINUOUS_BASELINES}, got {self.baseline!r}"
            )
        if self.max_staleness is not None and self.max_staleness < 0:
            raise ValueError(f"max_staleness must be >= 0 or None, got {self.max_staleness!r}")
        if self.page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {self.page_size!r}")
        if not 0.0 <= self.baseline_decay < 1.0:
            raise ValueError(f"baseline_decay must be in [0, 1), got {self.baseline_decay!r}")


def task_key(rollout: Rollout) -> str:
    """What a rollout's task is, for a per-task baseline: its group id, else a hash of its input."""
    if rollout.group_id:
        return rollout.group_id
    text = json.dumps(rollout.input, sort_keys=True, default=repr)
    return "input:" + hashlib.sha256(text.encode()).hexdigest()[:16]


class RolloutFeed:
    """Succeeded train rollouts not handed out before, read newest first back to a time cursor."""

    def __init__(self, store: LightningStore, config: ContinuousConfig, cursor: float | None = None) -> None:
        self.store = store
        self.config = config
        self.cursor = cursor
        """The latest finish time handed out (None: nothing yet, the first poll reads back to the start)."""
        self.reads = 0
        """Store reads made by all polls (a poll with nothing new costs one)."""
        self._seen: dict[str, float] = {}

    async def poll(self) -> list[Rollout]:
        """The rollouts that finished since the last poll (not yet trained), oldest first."""
        floor = None if self.cursor is None else self.cursor - self.config.lookback_seconds
        found: dict[str, Rollout] = {}
        offset = 0
        while True:
            page = await self.store.query_rollouts(
                status=["succeeded"],
                mode="train",
                sort_by="end_time",
                descending=True,
                limit=self.config.page_size,
                offset=offset,
            )
            self.reads += 1
            reached = False
            for rollout in page:
                end = rollout.end_time or 0.0
                if floor is not None and end < floor:
                    reached = True
                    break
                if rollout.rollout_id in self._seen or TRAINED_MARK in rollout.metadata:
                    continue
                found[rollout.rollout_id] = rollout
            if reached or len(page) < self.config.page_size:
                break
            offset += self.config.page_size
        fresh = sorted(found.values(), key=lambda r: (r.end_time or 0.0, r.rollout_id))
        for rollout in fresh:
            self._seen[rollout.rollout_id] = rollout.end_time or 0.0
        if fresh:
            self.cursor = max(self.cursor or 0.0, fresh[-1].end_time or 0.0)
        if self.cursor is not None:  # ids behind the look-back window can never come back
            horizon = self.cursor - 2 * self.config.lookback_seconds
            self._seen = {k: v for k, v in self._seen.items() if v >= horizon}
        return fresh


class VersionLineage:
    """Publishes between a version and the current one, by walking `parent_id` (bounded, cached)."""

    def __init__(self, store: LightningStore) -> None:
        self.store = store
        self._versions: dict[str, ResourceVersion] = {}

    async def version(self, version_id: str) -> ResourceVersion | None:
        """The version (cached: versions never change)."""
        found = self._versions.get(version_id)
        if found is None:
            found = await self.store.get_resource_version(version_id)
            if found is not None:
                self._versions[version_id] = found
        return found

    async def staleness(self, current: ResourceVersion, version_ids: set[str], limit: int) -> int | None:
        """Publishes between `current` and the oldest of `version_ids` of its resource; `limit + 1` when
        one is further back than `limit` or off the lineage; None when none is of this resource."""
        if not version_ids:
            return None
        within = await self.ancestors(current, limit)
        worst: int | None = None
        for version_id in version_ids:
            if version_id in within:
                distance = within[version_id]
            else:
                version = await self.version(version_id)
                if version is None or version.name != current.name:
                    continue  # another resource's call (a second LLM), not this one's data
                distance = limit + 1
            worst = distance if worst is None else max(worst, distance)
        return worst

    async def split_fresh(
        self,
        current: ResourceVersion,
        rollouts: Sequence[Rollout],
        spans: dict[str, list[Span]],
        limit: int | None,
    ) -> tuple[list[Rollout], dict[str, str]]:
        """The rollouts sampled at most `limit` publishes behind `current` (None: all), and why each
        other one is skipped ("stale", or "unversioned": no LLM call or resource set says which version
        of `current`'s resource sampled it)."""
        if limit is None:
            return list(rollouts), {}
        fresh: list[Rollout] = []
        skipped: dict[str, str] = {}
        bound_versions: dict[str, set[str]] = {}  # resource sets never change: one read each
        for r in rollouts:
            versions = sampling_versions(spans.get(r.rollout_id, []))
            if not versions and r.resources_id:
                if r.resources_id not in bound_versions:
                    bound = await self.store.get_resources_by_id(r.resources_id)
                    named = bound.versions.get(current.name) if bound else None
                    bound_versions[r.resources_id] = {named.version_id} if named else set()
                versions = bound_versions[r.resources_id]
            distance = await self.staleness(current, versions, limit)
            if distance is None:
                skipped[r.rollout_id] = "unversioned"
            elif distance > limit:
                skipped[r.rollout_id] = "stale"
            else:
                fresh.append(r)
        return fresh, skipped

    async def ancestors(self, current: ResourceVersion, depth: int) -> dict[str, int]:
        """version id -> publishes behind `current`, for `current` and up to `depth` ancestors."""
        out = {current.version_id: 0}
        version = current
        for distance in range(1, depth + 1):
            if version.parent_id is None:
                break
            parent = await self.version(version.parent_id)
            if parent is None:
                break
            out[parent.version_id] = distance
            version = parent
        return out


def skip_counts(skipped: dict[str, str]) -> tuple[int, int]:
    """(stale, unversioned) among the reasons `VersionLineage.split_fresh` gave for skipping rollouts."""
    stale = sum(1 for why in skipped.values() if why == "stale")
    return stale, len(skipped) - stale


def sampling_versions(spans: Sequence[Span]) -> set[str]:
    """The resource versions the rollout's LLM calls were served by (the proxy records one on each)."""
    return {
        str(s.attributes[semconv.LLM_RESOURCE_VERSION])
        for s in spans
        if is_llm_span(s) and s.attributes.get(semconv.LLM_RESOURCE_VERSION)
    }
