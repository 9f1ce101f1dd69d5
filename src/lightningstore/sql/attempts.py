"""SqlAttempts: SqlStore's attempt progress (heartbeats, updates, endings and the watchdog sweep)."""

from __future__ import annotations

import sqlalchemy as sa

from lightningstore.data.attempt import Attempt
from lightningstore.data.attempt_end import ending_status, owned_rewards
from lightningstore.data.rollout import RolloutConfig
from lightningstore.data.status import AttemptStatus, WorkerStatus
from lightningstore.data.store_request import AttemptFinish, AttemptUpdate
from lightningstore.data.unset import UNSET
from lightningstore.errors import IllegalTransitionError, InvalidInputError, NotFoundError
from lightningstore.finite import refuse_non_finite
from lightningstore.sql import statements, tables
from lightningstore.sql.database import parse_enum
from lightningstore.sql.part import SqlPart
from lightningstore.sql.span_writer import SpanBatch


class SqlAttempts(SqlPart):
    async def heartbeat(self, rollout_id: str, attempt_id: str, *, worker_id: str | None = None) -> Attempt:
        def _tx(conn: sa.Connection) -> Attempt:
            attempt = self._life.get_attempt(conn, rollout_id, attempt_id)
            if attempt.status.terminal:
                raise IllegalTransitionError(
                    "attempt", attempt_id, attempt.status.value, AttemptStatus.RUNNING.value
                )
            attempt = self._life.mark_alive(conn, attempt)
            if worker_id is not None:
                self._life.touch_worker(conn, worker_id, WorkerStatus.BUSY, rollout_id, attempt_id)
            return attempt

        return await self._db.write(_tx)

    async def _update_attempt(self, update: AttemptUpdate) -> Attempt:
        rollout_id, attempt_id, status, metadata = (
            update.rollout_id,
            update.attempt_id,
            update.status,
            update.metadata,
        )
        new_status = parse_enum(AttemptStatus, status, "status") if status is not UNSET else UNSET
        if metadata is not UNSET and not isinstance(metadata, dict):
            raise InvalidInputError("metadata", f"must be an object, got {type(metadata).__name__}")
        refuse_non_finite(metadata, "metadata")
        values = update.changes()
        values.pop("status", None)

        def _tx(conn: sa.Connection) -> Attempt:
            target_id = attempt_id
            if target_id == "latest":
                latest = self._life.latest_attempt(conn, rollout_id)
                if latest is None:
                    raise NotFoundError("attempt", f"latest of rollout {rollout_id}")
                target_id = latest.attempt_id
            locked = None
            if new_status is UNSET:
                attempt = self._life.get_attempt(conn, rollout_id, target_id)
            else:  # its rollout, locked, in the same round trip: ending the attempt reads it
                attempt, locked = self._life.get_attempt_ending(conn, rollout_id, target_id)
            if values:  # rare: built per call
                conn.execute(
                    sa.update(tables.attempts)
                    .where(tables.attempts.c.attempt_id == target_id)
                    .values(**values)
                )
                attempt = attempt.model_copy(update=values)
            if new_status is not UNSET and new_status != attempt.status:
                attempt = self._life.finish_attempt(
                    conn, attempt, new_status, attempt.failure_reason, locked=locked
                )
            return attempt

        return await self._db.write(_tx)

    async def _finish_attempt(self, finish: AttemptFinish) -> Attempt:
        rollout_id, attempt_id, failure_reason = finish.rollout_id, finish.attempt_id, finish.failure_reason
        ending = ending_status(finish.status)
        batch = SpanBatch.of(finish.spans)
        checked = owned_rewards(finish.rewards, rollout_id, attempt_id)
        for span in batch.spans:
            if (span.rollout_id, span.attempt_id) != (rollout_id, attempt_id):
                raise InvalidInputError(
                    "spans",
                    f"span {span.span_id!r} belongs to attempt {span.attempt_id!r} of rollout "
                    f"{span.rollout_id!r}, not to attempt {attempt_id!r} of rollout {rollout_id!r}",
                )

        def _tx(conn: sa.Connection) -> tuple[Attempt, IllegalTransitionError | None]:
            self._life.get_attempt(conn, rollout_id, attempt_id)  # NotFoundError before anything is written
            if batch.unique:
                self._span_writer.store_spans(conn, batch)
            for reward in checked:
                self._span_writer.store_reward(conn, reward)
            attempt = self._life.get_attempt(conn, rollout_id, attempt_id)  # a span may have woken it
            if attempt.status == ending:
                return attempt, None  # a repeated finish
            if attempt.status.terminal:  # ended elsewhere: its telemetry is kept, the ending refused
                return attempt, IllegalTransitionError(
                    "attempt", attempt_id, attempt.status.value, ending.value
                )
            return self._life.finish_attempt(conn, attempt, ending, failure_reason), None

        attempt, refused = await self._db.write(_tx)
        if refused is not None:
            raise refused
        return attempt

    # ---- the watchdog --------------------------------------------------------------------------

    async def sweep_stale_attempts(self, now: float | None = None) -> list[Attempt]:
        at = self._db.now() if now is None else now
        return await self._db.write(lambda conn: self._sweep(conn, at))

    def _sweep(self, conn: sa.Connection, now: float) -> list[Attempt]:
        changed: list[Attempt] = []
        for row in statements.SELECT_STALE_ATTEMPTS.run(conn, {"now": now}).rows:
            m = dict(row)
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
            changed.append(self._life.finish_attempt(conn, attempt, status, reason))
        return changed
