"""SqlStore: the LightningStore on SQLAlchemy 2 (SQLite file by default, PostgreSQL by URL)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.dialects import postgresql, sqlite

from lightningstore import tables as t
from lightningstore.attempt import Attempt, AttemptedRollout
from lightningstore.errors import ConflictError, IllegalTransitionError, InvalidInputError, NotFoundError
from lightningstore.reward import Reward, RewardIn
from lightningstore.rollout import Rollout, RolloutConfig, RolloutRequest
from lightningstore.span import Span, SpanIn
from lightningstore.sql_base import new_id
from lightningstore.sql_resources import SqlResources
from lightningstore.sql_rows import (
    attempt_from_row,
    reward_from_row,
    rollout_from_row,
    span_from_row,
    worker_from_row,
)
from lightningstore.statistics import StoreStatistics
from lightningstore.status import (
    AttemptStatus,
    RolloutMode,
    RolloutStatus,
    WorkerStatus,
    check_attempt_transition,
    check_rollout_transition,
)
from lightningstore.store import LightningStore, RolloutSortKey
from lightningstore.unset import UNSET, Unset
from lightningstore.worker import Worker

WAITING = (RolloutStatus.QUEUING.value, RolloutStatus.REQUEUING.value)
OPEN_ATTEMPT = (AttemptStatus.PREPARING.value, AttemptStatus.RUNNING.value, AttemptStatus.UNRESPONSIVE.value)
SORT_COLUMNS = {"enqueue_time", "start_time", "end_time", "rollout_id", "status"}


def _parse(model: type, value: Any, field: str) -> Any:
    try:
        return model(value)
    except ValueError as exc:
        raise InvalidInputError(field, f"invalid value {value!r} ({exc})") from exc


class SqlStore(SqlResources, LightningStore):
    """LightningStore on a SQL database. `SqlStore("runs/store.db")` or `SqlStore("postgresql://...")`.

    The schema is brought to the newest migration on first use.
    """

    _last_sweep = 0.0
    sweep_interval = 1.0

    # ---- enqueue and claim ------------------------------------------------------------------

    async def enqueue_many_rollouts(self, requests: Sequence[RolloutRequest]) -> list[Rollout]:
        requests = [
            r if isinstance(r, RolloutRequest) else RolloutRequest.model_validate(r) for r in requests
        ]
        if not requests:
            return []
        now = self.now()

        def _tx(conn: sa.Connection) -> Any:
            self._check_resources_ids(conn, {r.resources_id for r in requests if r.resources_id})
            given = [r.rollout_id for r in requests if r.rollout_id]
            if len(given) != len(set(given)):
                raise InvalidInputError("rollout_id", "the same rollout_id appears twice in one request")
            existing: dict[str, Rollout] = {}
            if given:
                rows = conn.execute(sa.select(t.rollouts).where(t.rollouts.c.rollout_id.in_(given)))
                existing = {r.rollout_id: r for r in map(rollout_from_row, rows)}
            base_seq = (
                conn.execute(sa.select(sa.func.coalesce(sa.func.max(t.rollouts.c.queue_seq), 0)))
            ).scalar_one()
            result: list[Rollout] = []
            new_rows: list[dict[str, Any]] = []
            for i, req in enumerate(requests):
                if req.rollout_id in existing:
                    stored = existing[req.rollout_id]
                    if stored.input != req.input:
                        raise ConflictError(
                            f"rollout {req.rollout_id!r} already exists with a different input"
                        )
                    result.append(stored)
                    continue
                rollout = Rollout(
                    rollout_id=req.rollout_id or new_id("ro"),
                    input=req.input,
                    mode=req.mode,
                    resources_id=req.resources_id,
                    config=req.config,
                    status=RolloutStatus.QUEUING,
                    metadata=req.metadata,
                    group_id=req.group_id,
                    enqueue_time=now,
                )
                row = rollout.model_dump(mode="json")
                row["queue_seq"] = base_seq + i + 1
                new_rows.append(row)
                result.append(rollout)
            if new_rows:
                conn.execute(sa.insert(t.rollouts), new_rows)

            return result

        return await self._write(_tx)

    def _check_resources_ids(self, conn: sa.Connection, ids: set[str | None]) -> None:
        ids = {i for i in ids if i}
        if not ids:
            return
        found = set(
            (
                conn.execute(
                    sa.select(t.resource_sets.c.resources_id).where(t.resource_sets.c.resources_id.in_(ids))
                )
            ).scalars()
        )
        missing = sorted(ids - found)
        if missing:
            raise NotFoundError("resource set", missing[0])

    async def dequeue_many_rollouts(
        self, limit: int, *, worker_id: str | None = None
    ) -> list[AttemptedRollout]:
        if limit < 1:
            raise InvalidInputError("limit", f"must be at least 1, got {limit}")
        await self._maybe_sweep()

        def _tx(conn: sa.Connection) -> Any:
            query = (
                sa.select(t.rollouts)
                .where(t.rollouts.c.status.in_(WAITING))
                .order_by(t.rollouts.c.queue_seq, t.rollouts.c.rollout_id)
                .limit(limit)
                .with_for_update(skip_locked=True)
            )
            rows = list(conn.execute(query))
            return [self._open_attempt(conn, rollout_from_row(row), worker_id) for row in rows]

        return await self._write(_tx)

    def _open_attempt(self, conn: sa.Connection, rollout: Rollout, worker_id: str | None) -> AttemptedRollout:
        """Move a waiting rollout to preparing and open its next attempt (inside a write transaction)."""
        check_rollout_transition(rollout.rollout_id, rollout.status, RolloutStatus.PREPARING)
        if rollout.num_attempts >= rollout.config.max_attempts:
            raise ConflictError(
                f"rollout {rollout.rollout_id!r} has used all {rollout.config.max_attempts} attempts"
            )
        now = self.now()
        attempt = Attempt(
            attempt_id=new_id("at"),
            rollout_id=rollout.rollout_id,
            sequence_id=rollout.num_attempts + 1,
            status=AttemptStatus.PREPARING,
            worker_id=worker_id,
            start_time=now,
        )
        conn.execute(sa.insert(t.attempts), [attempt.model_dump(mode="json")])
        rollout = rollout.model_copy(
            update={
                "status": RolloutStatus.PREPARING,
                "num_attempts": attempt.sequence_id,
                "start_time": rollout.start_time or now,
            }
        )
        conn.execute(
            sa.update(t.rollouts)
            .where(t.rollouts.c.rollout_id == rollout.rollout_id)
            .values(
                status=rollout.status.value,
                num_attempts=rollout.num_attempts,
                start_time=rollout.start_time,
                current_attempt_id=attempt.attempt_id,
            )
        )
        if worker_id is not None:
            self._touch_worker(conn, worker_id, WorkerStatus.BUSY, rollout.rollout_id, attempt.attempt_id)
        return AttemptedRollout(rollout=rollout, attempt=attempt)

    async def start_rollout(
        self,
        input: Any,
        *,
        mode: RolloutMode | str = RolloutMode.TRAIN,
        resources_id: str | None = None,
        config: RolloutConfig | None = None,
        metadata: dict[str, Any] | None = None,
        group_id: str | None = None,
        worker_id: str | None = None,
    ) -> AttemptedRollout:
        (rollout,) = await self.enqueue_many_rollouts(
            [
                RolloutRequest(
                    input=input,
                    mode=_parse(RolloutMode, mode, "mode"),
                    resources_id=resources_id,
                    config=config or RolloutConfig(),
                    metadata=metadata or {},
                    group_id=group_id,
                )
            ]
        )
        return await self.start_attempt(rollout.rollout_id, worker_id=worker_id)

    async def start_attempt(self, rollout_id: str, *, worker_id: str | None = None) -> AttemptedRollout:
        def _tx(conn: sa.Connection) -> Any:
            rollout = self._get_rollout(conn, rollout_id, lock=True)
            if rollout.status.value not in WAITING:
                raise IllegalTransitionError(
                    "rollout", rollout_id, rollout.status.value, RolloutStatus.PREPARING.value
                )
            return self._open_attempt(conn, rollout, worker_id)

        return await self._write(_tx)

    # ---- progress -----------------------------------------------------------------------------

    async def heartbeat(self, rollout_id: str, attempt_id: str, *, worker_id: str | None = None) -> Attempt:
        def _tx(conn: sa.Connection) -> Any:
            attempt = self._get_attempt(conn, rollout_id, attempt_id)
            if attempt.status.terminal:
                raise IllegalTransitionError(
                    "attempt", attempt_id, attempt.status.value, AttemptStatus.RUNNING.value
                )
            attempt = self._mark_alive(conn, attempt)
            if worker_id is not None:
                self._touch_worker(conn, worker_id, WorkerStatus.BUSY, rollout_id, attempt_id)
            return attempt

        return await self._write(_tx)

    def _mark_alive(self, conn: sa.Connection, attempt: Attempt) -> Attempt:
        """Record liveness; preparing -> running, and revive unresponsive if still current."""
        now = self.now()
        values: dict[str, Any] = {"last_heartbeat_time": now}
        if attempt.status in (AttemptStatus.PREPARING, AttemptStatus.UNRESPONSIVE):
            rollout, current = self._get_rollout_and_current(conn, attempt.rollout_id)
            live_rollout = rollout.status in (RolloutStatus.PREPARING, RolloutStatus.RUNNING)
            if current == attempt.attempt_id and live_rollout:
                values["status"] = AttemptStatus.RUNNING.value
                if rollout.status == RolloutStatus.PREPARING:
                    self._set_rollout(conn, rollout, RolloutStatus.RUNNING)
            elif attempt.status == AttemptStatus.PREPARING:
                values["status"] = AttemptStatus.RUNNING.value
        conn.execute(
            sa.update(t.attempts).where(t.attempts.c.attempt_id == attempt.attempt_id).values(**values)
        )
        return attempt.model_copy(
            update={"last_heartbeat_time": now, "status": AttemptStatus(values.get("status", attempt.status))}
        )

    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: str | Literal["latest"],
        *,
        status: AttemptStatus | str | Unset = UNSET,
        failure_reason: str | None | Unset = UNSET,
        worker_id: str | None | Unset = UNSET,
        metadata: dict[str, Any] | Unset = UNSET,
    ) -> Attempt:
        new_status = _parse(AttemptStatus, status, "status") if status is not UNSET else UNSET
        if metadata is not UNSET and not isinstance(metadata, dict):
            raise InvalidInputError("metadata", f"must be an object, got {type(metadata).__name__}")

        def _tx(conn: sa.Connection) -> Any:
            target_id = attempt_id
            if target_id == "latest":
                latest = self._latest_attempt(conn, rollout_id)
                if latest is None:
                    raise NotFoundError("attempt", f"latest of rollout {rollout_id}")
                target_id = latest.attempt_id
            attempt = self._get_attempt(conn, rollout_id, target_id)
            values: dict[str, Any] = {}
            if failure_reason is not UNSET:
                values["failure_reason"] = failure_reason
            if worker_id is not UNSET:
                values["worker_id"] = worker_id
            if metadata is not UNSET:
                values["metadata"] = metadata
            if values:
                conn.execute(
                    sa.update(t.attempts).where(t.attempts.c.attempt_id == target_id).values(**values)
                )
                attempt = attempt.model_copy(update=values)
            if new_status is not UNSET and new_status != attempt.status:
                attempt = self._finish_attempt(conn, attempt, new_status, attempt.failure_reason)
            return attempt

        return await self._write(_tx)

    def _finish_attempt(
        self, conn: sa.Connection, attempt: Attempt, status: AttemptStatus, reason: str | None
    ) -> Attempt:
        """Move an attempt to `status` and carry its rollout along (requeue / fail / succeed)."""
        check_attempt_transition(attempt.attempt_id, attempt.status, status)
        now = self.now()
        values: dict[str, Any] = {"status": status.value}
        if status.terminal:
            values["end_time"] = now
        if reason is not None:
            values["failure_reason"] = reason
        rollout, current = self._get_rollout_and_current(conn, attempt.rollout_id)
        if current == attempt.attempt_id and not rollout.status.terminal:
            target = self._rollout_target(rollout, status)
            if target is not None and target != rollout.status:
                check_rollout_transition(rollout.rollout_id, rollout.status, target)
                self._set_rollout(conn, rollout, target, reason if target == RolloutStatus.FAILED else None)
        conn.execute(
            sa.update(t.attempts).where(t.attempts.c.attempt_id == attempt.attempt_id).values(**values)
        )
        if status.terminal and attempt.worker_id:
            self._touch_worker(conn, attempt.worker_id, WorkerStatus.IDLE, None, None)
        return attempt.model_copy(update={**values, "status": status})

    @staticmethod
    def _rollout_target(rollout: Rollout, status: AttemptStatus) -> RolloutStatus | None:
        if status == AttemptStatus.SUCCEEDED:
            return RolloutStatus.SUCCEEDED
        if status == AttemptStatus.RUNNING:
            return RolloutStatus.RUNNING
        if status.is_failure:
            retry = status in rollout.config.retry_on and rollout.num_attempts < rollout.config.max_attempts
            if retry:
                return RolloutStatus.REQUEUING
            # An unresponsive attempt may still come back; only its timeout (or a cancel) ends it.
            return None if status == AttemptStatus.UNRESPONSIVE else RolloutStatus.FAILED
        return None

    def _set_rollout(
        self, conn: sa.Connection, rollout: Rollout, status: RolloutStatus, reason: str | None = None
    ) -> Rollout:
        values: dict[str, Any] = {"status": status.value}
        if status.terminal:
            values["end_time"] = self.now()
        if reason is not None:
            values["failure_reason"] = reason
        conn.execute(
            sa.update(t.rollouts).where(t.rollouts.c.rollout_id == rollout.rollout_id).values(**values)
        )
        self._notify()
        return rollout.model_copy(update={**values, "status": status})

    async def update_rollout(
        self,
        rollout_id: str,
        *,
        status: RolloutStatus | str | Unset = UNSET,
        metadata: dict[str, Any] | Unset = UNSET,
        config: RolloutConfig | Unset = UNSET,
        resources_id: str | None | Unset = UNSET,
    ) -> Rollout:
        new_status = _parse(RolloutStatus, status, "status") if status is not UNSET else UNSET
        if config is not UNSET and not isinstance(config, RolloutConfig):
            try:
                config = RolloutConfig.model_validate(config)
            except ValidationError as exc:
                raise InvalidInputError("config", str(exc)) from exc
        if metadata is not UNSET and not isinstance(metadata, dict):
            raise InvalidInputError("metadata", f"must be an object, got {type(metadata).__name__}")

        def _tx(conn: sa.Connection) -> Any:
            rollout = self._get_rollout(conn, rollout_id, lock=True)
            values: dict[str, Any] = {}
            if metadata is not UNSET:
                values["metadata"] = metadata
            if config is not UNSET:
                values["config"] = config.model_dump(mode="json")
            if resources_id is not UNSET:
                self._check_resources_ids(conn, {resources_id})
                values["resources_id"] = resources_id
            if values:
                conn.execute(
                    sa.update(t.rollouts).where(t.rollouts.c.rollout_id == rollout_id).values(**values)
                )
                rollout = self._get_rollout(conn, rollout_id)
            if new_status is not UNSET and new_status != rollout.status:
                check_rollout_transition(rollout_id, rollout.status, new_status)
                self._close_current_attempt(conn, rollout, new_status)
                rollout = self._set_rollout(conn, rollout, new_status)
            return rollout

        return await self._write(_tx)

    def _close_current_attempt(self, conn: sa.Connection, rollout: Rollout, target: RolloutStatus) -> None:
        """When a caller moves a rollout to a terminal or requeuing state, end its open attempt."""
        if not (target.terminal or target == RolloutStatus.REQUEUING):
            return
        _, current_id = self._get_rollout_and_current(conn, rollout.rollout_id)
        if current_id is None:
            return
        attempt = self._get_attempt(conn, rollout.rollout_id, current_id)
        if attempt.status.terminal:
            return
        status = AttemptStatus.SUCCEEDED if target == RolloutStatus.SUCCEEDED else AttemptStatus.FAILED
        reason = None if status == AttemptStatus.SUCCEEDED else f"rollout moved to {target.value}"
        conn.execute(
            sa.update(t.attempts)
            .where(t.attempts.c.attempt_id == current_id)
            .values(status=status.value, end_time=self.now(), failure_reason=reason)
        )

    # ---- waiting and the watchdog --------------------------------------------------------------

    async def wait_for_rollouts(
        self, rollout_ids: Sequence[str], *, timeout: float | None = None
    ) -> list[Rollout]:
        if timeout is not None and timeout < 0:
            raise InvalidInputError("timeout", f"must be >= 0, got {timeout}")
        ids = list(rollout_ids)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        changed = asyncio.Event()
        waiter = (loop, changed)
        self._waiters.add(waiter)
        try:
            return await self._wait_loop(ids, changed, deadline)
        finally:
            self._waiters.discard(waiter)

    async def _wait_loop(
        self, ids: list[str], changed: asyncio.Event, deadline: float | None
    ) -> list[Rollout]:
        loop = asyncio.get_running_loop()
        delay = 0.01
        while True:
            changed.clear()
            rollouts = await self.query_rollouts(rollout_ids=ids)
            found = {r.rollout_id: r for r in rollouts}
            missing = [i for i in ids if i not in found]
            if missing:
                raise NotFoundError("rollout", missing[0])
            done = [found[i] for i in ids if found[i].status.terminal]
            if len(done) == len(ids) or (deadline is not None and loop.time() >= deadline):
                return done
            await self._maybe_sweep()
            wait = delay if deadline is None else min(delay, max(0.0, deadline - loop.time()))
            try:
                # Wake early on an in-process change; poll for changes made by other processes.
                await asyncio.wait_for(changed.wait(), timeout=wait)
            except TimeoutError:
                pass
            delay = min(delay * 1.5, 0.5)

    async def _maybe_sweep(self) -> None:
        now = self.now()
        if now - self._last_sweep >= self.sweep_interval:
            self._last_sweep = now
            await self.sweep_stale_attempts(now)

    async def sweep_stale_attempts(self, now: float | None = None) -> list[Attempt]:
        now = self.now() if now is None else now
        return await self._write(lambda conn: self._sweep(conn, now))

    def _sweep(self, conn: sa.Connection, now: float) -> list[Attempt]:
        rows = conn.execute(
            sa.select(t.attempts, t.rollouts.c.config.label("rollout_config"))
            .join(t.rollouts, t.rollouts.c.rollout_id == t.attempts.c.rollout_id)
            .where(t.attempts.c.status.in_(OPEN_ATTEMPT))
        )
        changed: list[Attempt] = []
        for row in list(rows):
            m = dict(row._mapping)
            config = RolloutConfig.model_validate(m.pop("rollout_config"))
            attempt = Attempt.model_validate(m)
            if config.timeout_seconds is not None and now - attempt.start_time > config.timeout_seconds:
                status, reason = (
                    AttemptStatus.TIMEOUT,
                    f"attempt exceeded timeout of {config.timeout_seconds}s",
                )
            elif (
                config.unresponsive_seconds is not None
                and attempt.status != AttemptStatus.UNRESPONSIVE
                and now - (attempt.last_heartbeat_time or attempt.start_time) > config.unresponsive_seconds
            ):
                status, reason = (
                    AttemptStatus.UNRESPONSIVE,
                    f"no span or heartbeat for {config.unresponsive_seconds}s",
                )
            else:
                continue
            changed.append(self._finish_attempt(conn, attempt, status, reason))
        return changed

    # ---- spans and rewards ------------------------------------------------------------------------

    async def add_many_spans(self, spans: Sequence[SpanIn]) -> list[Span]:
        spans = [s if isinstance(s, SpanIn) else SpanIn.model_validate(s) for s in spans]
        if not spans:
            return []
        unique: dict[tuple[str, str], SpanIn] = {}
        for span in spans:
            unique.setdefault((span.attempt_id, span.span_id), span)

        def _tx(conn: sa.Connection) -> Any:
            attempt_ids = {s.attempt_id for s in unique.values()}
            rows = conn.execute(sa.select(t.attempts).where(t.attempts.c.attempt_id.in_(attempt_ids)))
            attempts = {a.attempt_id: a for a in map(attempt_from_row, rows)}
            for span in unique.values():
                attempt = attempts.get(span.attempt_id)
                if attempt is None:
                    raise NotFoundError("attempt", span.attempt_id)
                if attempt.rollout_id != span.rollout_id:
                    raise InvalidInputError(
                        "rollout_id",
                        f"attempt {span.attempt_id!r} belongs to rollout {attempt.rollout_id!r}, not {span.rollout_id!r}",
                    )
            insert = postgresql.insert(t.spans) if self.dialect == "postgresql" else sqlite.insert(t.spans)
            rows = conn.execute(
                insert.on_conflict_do_nothing(index_elements=["attempt_id", "span_id"]).returning(
                    t.spans.c.attempt_id, t.spans.c.span_id, t.spans.c.sequence_id
                ),
                [s.model_dump(mode="json") for s in unique.values()],
            )
            stored = {
                (r.attempt_id, r.span_id): Span(
                    **unique[(r.attempt_id, r.span_id)].model_dump(), sequence_id=r.sequence_id
                )
                for r in rows
            }
            repeats = [key for key in unique if key not in stored]
            if repeats:  # a repeat returns the stored copy, not the one sent again
                stored.update(self._select_spans(conn, repeats))
            for attempt in attempts.values():
                if not attempt.status.terminal:
                    self._mark_alive(conn, attempt)
            return stored

        stored = await self._write(_tx)
        return [stored[(s.attempt_id, s.span_id)] for s in spans]

    def _select_spans(self, conn: sa.Connection, keys: list[tuple[str, str]]) -> dict[tuple[str, str], Span]:
        result: dict[tuple[str, str], Span] = {}
        by_attempt: dict[str, list[str]] = {}
        for attempt_id, span_id in keys:
            by_attempt.setdefault(attempt_id, []).append(span_id)
        for attempt_id, span_ids in by_attempt.items():
            rows = conn.execute(
                sa.select(t.spans).where(t.spans.c.attempt_id == attempt_id, t.spans.c.span_id.in_(span_ids))
            )
            for span in map(span_from_row, rows):
                result[(span.attempt_id, span.span_id)] = span
        return result

    async def add_reward(self, reward: RewardIn) -> Reward:
        reward = reward if isinstance(reward, RewardIn) else RewardIn.model_validate(reward)

        def _tx(conn: sa.Connection) -> Any:
            self._get_rollout(conn, reward.rollout_id)
            if reward.attempt_id is not None:
                self._get_attempt(conn, reward.rollout_id, reward.attempt_id)
            if reward.reward_id is not None:
                row = (
                    conn.execute(sa.select(t.rewards).where(t.rewards.c.reward_id == reward.reward_id))
                ).first()
                if row is not None:
                    stored = reward_from_row(row)
                    if stored.value != reward.value or stored.rollout_id != reward.rollout_id:
                        raise ConflictError(f"reward {reward.reward_id!r} already exists with other content")
                    return stored
            stored = Reward(
                **{**reward.model_dump(), "reward_id": reward.reward_id or new_id("rw")},
                create_time=self.now(),
            )
            conn.execute(sa.insert(t.rewards), [stored.model_dump(mode="json")])
            return stored

        return await self._write(_tx)

    # ---- queries ----------------------------------------------------------------------------------

    def _get_rollout(self, conn: sa.Connection, rollout_id: str, *, lock: bool = False) -> Rollout:
        query = sa.select(t.rollouts).where(t.rollouts.c.rollout_id == rollout_id)
        if lock:
            query = query.with_for_update()
        row = (conn.execute(query)).first()
        if row is None:
            raise NotFoundError("rollout", rollout_id)
        return rollout_from_row(row)

    def _get_rollout_and_current(self, conn: sa.Connection, rollout_id: str) -> tuple[Rollout, str | None]:
        """The rollout (row-locked) and the id of its current attempt."""
        query = sa.select(t.rollouts).where(t.rollouts.c.rollout_id == rollout_id).with_for_update()
        row = (conn.execute(query)).first()
        if row is None:
            raise NotFoundError("rollout", rollout_id)
        return rollout_from_row(row), row.current_attempt_id

    def _get_attempt(self, conn: sa.Connection, rollout_id: str, attempt_id: str) -> Attempt:
        row = (conn.execute(sa.select(t.attempts).where(t.attempts.c.attempt_id == attempt_id))).first()
        if row is None:
            raise NotFoundError("attempt", attempt_id)
        attempt = attempt_from_row(row)
        if attempt.rollout_id != rollout_id:
            raise NotFoundError("attempt", f"{attempt_id} of rollout {rollout_id}")
        return attempt

    def _latest_attempt(self, conn: sa.Connection, rollout_id: str) -> Attempt | None:
        row = (
            conn.execute(
                sa.select(t.attempts)
                .where(t.attempts.c.rollout_id == rollout_id)
                .order_by(t.attempts.c.sequence_id.desc())
                .limit(1)
            )
        ).first()
        return attempt_from_row(row) if row is not None else None

    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | None:
        def _tx(conn: sa.Connection) -> Any:
            try:
                return self._get_rollout(conn, rollout_id)
            except NotFoundError:
                return None

        return await self._read(_tx)

    async def query_rollouts(
        self,
        *,
        status: Sequence[RolloutStatus | str] | None = None,
        mode: RolloutMode | str | None = None,
        rollout_ids: Sequence[str] | None = None,
        group_id: str | None = None,
        sort_by: RolloutSortKey = "enqueue_time",
        descending: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Rollout]:
        if sort_by not in SORT_COLUMNS:
            raise InvalidInputError("sort_by", f"must be one of {sorted(SORT_COLUMNS)}, got {sort_by!r}")
        if limit is not None and limit < 0:
            raise InvalidInputError("limit", f"must be >= 0, got {limit}")
        if offset < 0:
            raise InvalidInputError("offset", f"must be >= 0, got {offset}")
        if isinstance(status, str):
            status = [status]
        query = sa.select(t.rollouts)
        if status is not None:
            query = query.where(
                t.rollouts.c.status.in_([_parse(RolloutStatus, s, "status").value for s in status])
            )
        if mode is not None:
            query = query.where(t.rollouts.c.mode == _parse(RolloutMode, mode, "mode").value)
        if rollout_ids is not None:
            query = query.where(t.rollouts.c.rollout_id.in_(list(rollout_ids)))
        if group_id is not None:
            query = query.where(t.rollouts.c.group_id == group_id)
        column = t.rollouts.c[sort_by]
        secondary = t.rollouts.c.queue_seq if sort_by == "enqueue_time" else t.rollouts.c.rollout_id
        if descending:
            query = query.order_by(column.desc(), secondary.desc())
        else:
            query = query.order_by(column, secondary)
        query = query.offset(offset)
        if limit is not None:
            query = query.limit(limit)

        def _tx(conn: sa.Connection) -> Any:
            return [rollout_from_row(r) for r in conn.execute(query)]

        return await self._read(_tx)

    async def query_attempts(self, rollout_id: str) -> list[Attempt]:
        def _tx(conn: sa.Connection) -> Any:
            self._get_rollout(conn, rollout_id)
            rows = conn.execute(
                sa.select(t.attempts)
                .where(t.attempts.c.rollout_id == rollout_id)
                .order_by(t.attempts.c.sequence_id)
            )
            return [attempt_from_row(r) for r in rows]

        return await self._read(_tx)

    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        def _tx(conn: sa.Connection) -> Any:
            return self._latest_attempt(conn, rollout_id)

        return await self._read(_tx)

    async def query_spans(
        self,
        rollout_id: str,
        attempt_id: str | Literal["latest"] | None = None,
        *,
        name: str | None = None,
        after_sequence_id: int | None = None,
        limit: int | None = None,
    ) -> list[Span]:
        if limit is not None and limit < 0:
            raise InvalidInputError("limit", f"must be >= 0, got {limit}")

        def _tx(conn: sa.Connection) -> Any:
            query = sa.select(t.spans).where(t.spans.c.rollout_id == rollout_id)
            if attempt_id == "latest":
                latest = self._latest_attempt(conn, rollout_id)
                if latest is None:
                    return []
                query = query.where(t.spans.c.attempt_id == latest.attempt_id)
            elif attempt_id is not None:
                query = query.where(t.spans.c.attempt_id == attempt_id)
            if name is not None:
                query = query.where(t.spans.c.name == name)
            if after_sequence_id is not None:
                query = query.where(t.spans.c.sequence_id > after_sequence_id)
            query = query.order_by(t.spans.c.sequence_id)
            if limit is not None:
                query = query.limit(limit)
            return [span_from_row(r) for r in conn.execute(query)]

        return await self._read(_tx)

    async def query_rewards(self, rollout_id: str, *, name: str | None = None) -> list[Reward]:
        query = sa.select(t.rewards).where(t.rewards.c.rollout_id == rollout_id)
        if name is not None:
            query = query.where(t.rewards.c.name == name)

        def _tx(conn: sa.Connection) -> Any:
            return [reward_from_row(r) for r in conn.execute(query.order_by(t.rewards.c.seq))]

        return await self._read(_tx)

    # ---- workers and statistics ------------------------------------------------------------------

    def _touch_worker(
        self,
        conn: sa.Connection,
        worker_id: str,
        status: WorkerStatus,
        rollout_id: str | None,
        attempt_id: str | None,
    ) -> None:
        values = {
            "status": status.value,
            "last_heartbeat_time": self.now(),
            "current_rollout_id": rollout_id,
            "current_attempt_id": attempt_id,
        }
        insert = postgresql.insert(t.workers) if self.dialect == "postgresql" else sqlite.insert(t.workers)
        conn.execute(
            insert.values(worker_id=worker_id, metadata={}, **values).on_conflict_do_update(
                index_elements=["worker_id"], set_=values
            )
        )

    async def update_worker(
        self,
        worker_id: str,
        *,
        status: WorkerStatus | str | Unset = UNSET,
        metadata: dict[str, Any] | Unset = UNSET,
    ) -> Worker:
        if not worker_id:
            raise InvalidInputError("worker_id", "must not be empty")
        new_status = _parse(WorkerStatus, status, "status") if status is not UNSET else UNSET

        def _tx(conn: sa.Connection) -> Any:
            row = (conn.execute(sa.select(t.workers).where(t.workers.c.worker_id == worker_id))).first()
            worker = worker_from_row(row) if row is not None else Worker(worker_id=worker_id)
            update: dict[str, Any] = {"last_heartbeat_time": self.now()}
            if new_status is not UNSET:
                update["status"] = new_status
            if metadata is not UNSET:
                update["metadata"] = metadata
            worker = worker.model_copy(update=update)
            data = worker.model_dump(mode="json")
            if row is None:
                conn.execute(sa.insert(t.workers), [data])
            else:
                conn.execute(sa.update(t.workers).where(t.workers.c.worker_id == worker_id).values(**data))
            return worker

        return await self._write(_tx)

    async def query_workers(self) -> list[Worker]:
        def _tx(conn: sa.Connection) -> Any:
            return [
                worker_from_row(r) for r in conn.execute(sa.select(t.workers).order_by(t.workers.c.worker_id))
            ]

        return await self._read(_tx)

    async def statistics(self) -> StoreStatistics:
        def _tx(conn: sa.Connection) -> Any:

            def count(table: sa.Table) -> int:
                return (conn.execute(sa.select(sa.func.count()).select_from(table))).scalar_one()

            def by_status(table: sa.Table) -> dict[str, int]:
                rows = conn.execute(sa.select(table.c.status, sa.func.count()).group_by(table.c.status))
                return {status: n for status, n in rows}

            rollouts_by_status = by_status(t.rollouts)
            attempts_by_status = by_status(t.attempts)
            return StoreStatistics(
                rollouts_by_status=rollouts_by_status,
                attempts_by_status=attempts_by_status,
                total_rollouts=sum(rollouts_by_status.values()),
                total_attempts=sum(attempts_by_status.values()),
                total_spans=count(t.spans),
                total_rewards=count(t.rewards),
                total_workers=count(t.workers),
                total_resource_versions=count(t.resource_versions),
            )

        return await self._read(_tx)
