"""The rollouts table: its filters (checked, with the field named on a bad value), one page of rows with
their reward, duration and resource versions, and the counts by status."""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import urlencode

from lightningstore.data.rollout import Rollout
from lightningstore.data.status import RolloutMode, RolloutStatus
from lightningstore.server.ui.access import PageError
from lightningstore.server.ui.outcome import primary_reward
from lightningstore.store import LightningStore

PER_PAGE_DEFAULT = 25
PER_PAGE_MAX = 200


@dataclass(frozen=True)
class RolloutFilter:
    status: RolloutStatus | None = None
    mode: RolloutMode | None = None
    group: str | None = None
    page: int = 1
    per_page: int = PER_PAGE_DEFAULT

    @classmethod
    def parse(cls, status: str, mode: str, group: str, page: str, per_page: str) -> RolloutFilter:
        """From the query string; a bad value is a 422 page naming the field and the value given."""

        def choice(field: str, text: str, kind: type[RolloutStatus] | type[RolloutMode]):  # noqa: ANN202
            if not text:
                return None
            try:
                return kind(text)
            except ValueError:
                raise PageError(422, f"{field}={text!r} is not one of {[k.value for k in kind]}") from None

        def number(field: str, text: str, default: int, top: int) -> int:
            if not text:
                return default
            if not text.isdigit() or not 1 <= int(text) <= top:
                raise PageError(422, f"{field}={text!r} must be a whole number from 1 to {top}")
            return int(text)

        return cls(
            status=choice("status", status, RolloutStatus),
            mode=choice("mode", mode, RolloutMode),
            group=group or None,
            page=number("page", page, 1, 1_000_000),
            per_page=number("per_page", per_page, PER_PAGE_DEFAULT, PER_PAGE_MAX),
        )

    def query(self, **changes: object) -> str:
        """This filter's query string, with `changes` applied (e.g. page=2)."""
        values = {
            "status": self.status.value if self.status else "",
            "mode": self.mode.value if self.mode else "",
            "group": self.group or "",
            "page": self.page,
            "per_page": self.per_page,
            **changes,
        }
        return urlencode({k: v for k, v in values.items() if v not in ("", None)})


@dataclass(frozen=True)
class RolloutRow:
    rollout: Rollout
    reward: float | None
    """The primary reward (as the trainer reads it), None when there is none yet."""
    duration_s: float | None
    versions: dict[str, str]


@dataclass(frozen=True)
class RolloutPage:
    rows: list[RolloutRow]
    has_next: bool
    counts: dict[str, int]
    total: int


async def rollout_page(store: LightningStore, f: RolloutFilter) -> RolloutPage:
    """Newest first; one read for the rows (one extra to know if there is a next page), one for rewards."""
    found = await store.query_rollouts(
        status=[f.status] if f.status else None,
        mode=f.mode,
        group_id=f.group,
        sort_by="enqueue_time",
        descending=True,
        limit=f.per_page + 1,
        offset=(f.page - 1) * f.per_page,
    )
    shown = found[: f.per_page]
    rewards = await store.query_rewards_many([r.rollout_id for r in shown]) if shown else {}
    sets: dict[str, dict[str, str]] = {}
    for rid in {r.resources_id for r in shown if r.resources_id}:
        resource_set = await store.get_resources_by_id(rid)
        versions = resource_set.versions if resource_set else {}
        sets[rid] = {name: version.version_id for name, version in versions.items()}
    now = time.time()
    rows = []
    for r in shown:
        reward = primary_reward(rewards.get(r.rollout_id, []))
        end = r.end_time if r.end_time is not None else (now if r.start_time is not None else None)
        rows.append(
            RolloutRow(
                rollout=r,
                reward=reward,
                duration_s=None if r.start_time is None or end is None else end - r.start_time,
                versions=sets.get(r.resources_id or "", {}),
            )
        )
    stats = await store.statistics()
    return RolloutPage(
        rows=rows,
        has_next=len(found) > f.per_page,
        counts=dict(sorted(stats.rollouts_by_status.items())),
        total=stats.total_rollouts,
    )
