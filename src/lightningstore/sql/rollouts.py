"""SqlRollouts: SqlStore's rollouts (enqueue, claim, update and wait)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from pydantic import ValidationError

from lightningstore.data.attempt import AttemptedRollout
from lightningstore.data.rollout import Rollout, RolloutConfig, RolloutRequest
from lightningstore.data.status import RolloutStatus, check_rollout_transition
from lightningstore.data.store_request import RolloutUpdate
from lightningstore.data.unset import UNSET
from lightningstore.errors import ConflictError, IllegalTransitionError, InvalidInputError, NotFoundError
from lightningstore.finite import refuse_non_finite
from lightningstore.sql import statements, tables
from lightningstore.sql.claim_signal import CLAIM_POLL_SECONDS
from lightningstore.sql.database import new_id, parse_enum
from lightningstore.sql.part import SqlPart
from lightningstore.sql.rows import rollout_from_row
from lightningstore.store import check_claim_wait

WAIT_COALESCE_SECONDS = 0.05
"""After a change wakes `wait_for_rollouts`, how long it lets further changes gather before re-reading."""


class SqlRollouts(SqlPart):
    """Moves rollouts through the queue."""

    async def enqueue_many_rollouts(self, requests: Sequence[RolloutRequest]) -> list[Rollout]:
        requests = [
            r if isinstance(r, RolloutRequest) else RolloutRequest.model_validate(r) for r in requests
        ]
        if not requests:
            return []
        for request in requests:
            request.check_finite()
        given = [r.rollout_id for r in requests if r.rollout_id]
        now = self._db.now()
        # Built before the write transaction, so that the writer thread only checks and inserts.
        fresh = [
            Rollout(
                **{**dict(req), "rollout_id": req.rollout_id or new_id("ro")},
                status=RolloutStatus.QUEUING,
                enqueue_time=now,
            )
            for req in requests
        ]
        rows = [rollout.model_dump(mode="json") for rollout in fresh]

        def _tx(conn: sa.Connection) -> list[Rollout]:
            self._life.check_resources_ids(conn, {r.resources_id for r in requests if r.resources_id})
            if len(given) != len(set(given)):
                raise InvalidInputError("rollout_id", "the same rollout_id appears twice in one request")
            if len(rows) == 1 and self._db.dialect == "postgresql":
                # The common case in one round trip; an id already stored falls through to the comparison.
                if statements.INSERT_ROLLOUT_IF_NEW.run(conn, rows[0]).rows:
                    self._db.queued(1)
                    return fresh
            existing = self._existing(conn, given)
            base_seq = statements.MAX_QUEUE_SEQ.run(conn).rows[0]["max_seq"]
            result: list[Rollout] = []
            new_rows: list[dict[str, Any]] = []
            for i, (req, rollout, row) in enumerate(zip(requests, fresh, rows, strict=True)):
                if req.rollout_id in existing:
                    stored = existing[req.rollout_id]
                    if stored.input != req.input:
                        raise ConflictError(
                            f"rollout {req.rollout_id!r} already exists with a different input"
                        )
                    result.append(stored)
                    continue
                new_rows.append({**row, "queue_seq": base_seq + i + 1})
                result.append(rollout)
            if new_rows:
                statements.INSERT_ROLLOUT.run(conn, new_rows)
                self._db.queued(len(new_rows))
            return result

        return await self._db.write(_tx, rows=len(rows))

    def _existing(self, conn: sa.Connection, ids: list[str]) -> dict[str, Rollout]:
        """The stored rollouts among `ids`: one prepared lookup per id on SQLite (or for one id), else one IN query."""
        if not ids:
            return {}
        if len(ids) == 1 or self._db.dialect == "sqlite":
            found = (statements.SELECT_ROLLOUT.run(conn, {"rollout_id": i}).first() for i in ids)
            return {row["rollout_id"]: rollout_from_row(row) for row in found if row is not None}
        rows = conn.execute(sa.select(tables.rollouts).where(tables.rollouts.c.rollout_id.in_(ids)))
        return {r.rollout_id: r for r in (rollout_from_row(row._mapping) for row in rows)}

    async def dequeue_many_rollouts(
        self, limit: int, *, worker_id: str | None = None, wait: float = 0
    ) -> list[AttemptedRollout]:
        if limit < 1:
            raise InvalidInputError("limit", f"must be at least 1, got {limit}")
        check_claim_wait(wait)
        await self.maybe_sweep()

        def _tx(conn: sa.Connection) -> list[AttemptedRollout]:
            rows = statements.OLDEST_WAITING[self._db.dialect].run(conn, {"limit": limit}).rows
            return self._life.open_attempts(conn, [rollout_from_row(row) for row in rows], worker_id)

        claimed = await self._db.write(_tx)
        if claimed:
            self._db.claim_signal.take(len(claimed))
            return claimed
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while (remaining := deadline - loop.time()) > 0:
            # Woken by a rollout this process queued, or every CLAIM_POLL_SECONDS for other processes'.
            woken = await self._db.claim_signal.acquire(min(remaining, CLAIM_POLL_SECONDS))
            if not woken and loop.time() >= deadline:
                break  # its time is up and nothing was queued here: the caller asks again when it will
            if claimed := await self._db.write(_tx):
                self._db.claim_signal.take(len(claimed) - 1)  # the permit it waited for covers one
                return claimed
        return []

    async def start_attempt(self, rollout_id: str, *, worker_id: str | None = None) -> AttemptedRollout:
        def _tx(conn: sa.Connection) -> AttemptedRollout:
            rollout = self._life.get_rollout(conn, rollout_id, lock=True)
            if rollout.status.value not in statements.WAITING:
                raise IllegalTransitionError(
                    "rollout", rollout_id, rollout.status.value, RolloutStatus.PREPARING.value
                )
            (claimed,) = self._life.open_attempts(conn, [rollout], worker_id)
            return claimed

        return await self._db.write(_tx)

    async def _update_rollout(self, update: RolloutUpdate) -> Rollout:
        rollout_id, status, metadata = update.rollout_id, update.status, update.metadata
        config, resources_id = update.config, update.resources_id
        new_status = parse_enum(RolloutStatus, status, "status") if status is not UNSET else UNSET
        if config is not UNSET and not isinstance(config, RolloutConfig):
            try:
                config = RolloutConfig.model_validate(config)
            except ValidationError as exc:
                raise InvalidInputError("config", str(exc)) from exc
        if metadata is not UNSET and not isinstance(metadata, dict):
            raise InvalidInputError("metadata", f"must be an object, got {type(metadata).__name__}")
        refuse_non_finite(metadata, "metadata")

        def _tx(conn: sa.Connection) -> Rollout:
            rollout = self._life.get_rollout(conn, rollout_id, lock=True)
            values: dict[str, Any] = {}
            if metadata is not UNSET:
                values["metadata"] = metadata
            if config is not UNSET:
                values["config"] = config.model_dump(mode="json")
            if resources_id is not UNSET:
                self._life.check_resources_ids(conn, {resources_id})
                values["resources_id"] = resources_id
            if values:  # rare: built per call
                conn.execute(
                    sa.update(tables.rollouts)
                    .where(tables.rollouts.c.rollout_id == rollout_id)
                    .values(**values)
                )
                rollout = self._life.get_rollout(conn, rollout_id)
            if new_status is not UNSET and new_status != rollout.status:
                check_rollout_transition(rollout_id, rollout.status, new_status)
                self._life.close_current_attempt(conn, rollout, new_status)
                rollout = self._life.set_rollout(conn, rollout, new_status)
            return rollout

        return await self._db.write(_tx)

    async def wait_for_rollouts(
        self, rollout_ids: Sequence[str], *, timeout: float | None = None
    ) -> list[Rollout]:
        if timeout is not None and timeout < 0:
            raise InvalidInputError("timeout", f"must be >= 0, got {timeout}")
        ids = list(rollout_ids)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        with self._db.changes() as changed:
            return await self._wait_loop(ids, changed, deadline)

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
            await self.maybe_sweep()
            wait = delay if deadline is None else min(delay, max(0.0, deadline - loop.time()))
            try:
                # Wake early on an in-process change; poll for changes made by other processes.
                await asyncio.wait_for(changed.wait(), timeout=wait)
                # A server commits hundreds of times a second while rollouts run: let changes gather
                # instead of re-reading every rollout after each commit.
                await asyncio.sleep(WAIT_COALESCE_SECONDS)
            except TimeoutError:
                pass
            delay = min(delay * 1.5, 0.5)
