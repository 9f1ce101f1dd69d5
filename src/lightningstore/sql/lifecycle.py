"""SqlLifecycle: the rollout and attempt state machines inside a transaction, shared by the SqlStore parts."""

from __future__ import annotations

import sqlalchemy as sa

from lightningstore.attempt import Attempt, AttemptedRollout
from lightningstore.errors import ConflictError, NotFoundError
from lightningstore.rollout import Rollout
from lightningstore.sql import statements, tables
from lightningstore.sql.database import SqlDatabase, new_id
from lightningstore.sql.rows import attempt_from_row, rollout_from_row
from lightningstore.status import (
    AttemptStatus,
    RolloutStatus,
    WorkerStatus,
    check_attempt_transition,
    check_rollout_transition,
)


class SqlLifecycle:
    """Reads and moves rollouts, attempts and workers; every method runs inside a transaction."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    # ---- lookups ----------------------------------------------------------------------------

    def get_rollout(self, conn: sa.Connection, rollout_id: str, *, lock: bool = False) -> Rollout:
        query = statements.SELECT_ROLLOUT_FOR_UPDATE if lock else statements.SELECT_ROLLOUT
        row = query.run(conn, {"rollout_id": rollout_id}).first()
        if row is None:
            raise NotFoundError("rollout", rollout_id)
        return rollout_from_row(row)

    def get_rollout_and_current(self, conn: sa.Connection, rollout_id: str) -> tuple[Rollout, str | None]:
        """The rollout (row-locked) and the id of its current attempt."""
        row = statements.SELECT_ROLLOUT_FOR_UPDATE.run(conn, {"rollout_id": rollout_id}).first()
        if row is None:
            raise NotFoundError("rollout", rollout_id)
        return rollout_from_row(row), row["current_attempt_id"]

    def get_attempt(self, conn: sa.Connection, rollout_id: str, attempt_id: str) -> Attempt:
        row = statements.SELECT_ATTEMPT.run(conn, {"attempt_id": attempt_id}).first()
        if row is None:
            raise NotFoundError("attempt", attempt_id)
        attempt = attempt_from_row(row)
        if attempt.rollout_id != rollout_id:
            raise NotFoundError("attempt", f"{attempt_id} of rollout {rollout_id}")
        return attempt

    def latest_attempt(self, conn: sa.Connection, rollout_id: str) -> Attempt | None:
        row = statements.SELECT_LATEST_ATTEMPT.run(conn, {"rollout_id": rollout_id}).first()
        return attempt_from_row(row) if row is not None else None

    def check_resources_ids(self, conn: sa.Connection, ids: set[str | None]) -> None:
        wanted = {i for i in ids if i}
        if not wanted:
            return
        query = sa.select(tables.resource_sets.c.resources_id).where(
            tables.resource_sets.c.resources_id.in_(wanted)
        )
        missing = sorted(wanted - set(conn.execute(query).scalars()))
        if missing:
            raise NotFoundError("resource set", missing[0])

    # ---- claims --------------------------------------------------------------------------------

    def open_attempts(
        self, conn: sa.Connection, rollouts: list[Rollout], worker_id: str | None
    ) -> list[AttemptedRollout]:
        """Move waiting rollouts to preparing and open the next attempt of each."""
        now = self._db.now()
        claimed: list[AttemptedRollout] = []
        for rollout in rollouts:
            check_rollout_transition(rollout.rollout_id, rollout.status, RolloutStatus.PREPARING)
            if rollout.num_attempts >= rollout.config.max_attempts:
                raise ConflictError(
                    f"rollout {rollout.rollout_id!r} has used all {rollout.config.max_attempts} attempts"
                )
            attempt = Attempt(
                attempt_id=new_id("at"),
                rollout_id=rollout.rollout_id,
                sequence_id=rollout.num_attempts + 1,
                status=AttemptStatus.PREPARING,
                worker_id=worker_id,
                start_time=now,
            )
            rollout = rollout.model_copy(
                update={
                    "status": RolloutStatus.PREPARING,
                    "num_attempts": attempt.sequence_id,
                    "start_time": rollout.start_time or now,
                }
            )
            claimed.append(AttemptedRollout(rollout=rollout, attempt=attempt))
        if not claimed:
            return claimed
        statements.INSERT_ATTEMPT.run(conn, [c.attempt.model_dump(mode="json") for c in claimed])
        statements.CLAIM_ROLLOUT.run(
            conn,
            [
                {
                    "p_rollout_id": c.rollout_id,
                    "p_num_attempts": c.rollout.num_attempts,
                    "p_start_time": c.rollout.start_time,
                    "p_attempt_id": c.attempt_id,
                }
                for c in claimed
            ],
        )
        if worker_id is not None:  # the worker ends up busy with the last rollout it claimed
            last = claimed[-1]
            self.touch_worker(conn, worker_id, WorkerStatus.BUSY, last.rollout_id, last.attempt_id)
        return claimed

    # ---- liveness --------------------------------------------------------------------------------

    def mark_alive(self, conn: sa.Connection, attempt: Attempt) -> Attempt:
        """Record liveness; preparing -> running, and revive unresponsive if still current."""
        now = self._db.now()
        status = self.wake(conn, attempt)
        statements.SET_ATTEMPT_ALIVE.run(
            conn, {"p_attempt_id": attempt.attempt_id, "p_status": status.value, "p_time": now}
        )
        return attempt.model_copy(update={"last_heartbeat_time": now, "status": status})

    def wake(self, conn: sa.Connection, attempt: Attempt) -> AttemptStatus:
        """The status a sign of life gives the attempt; moves its rollout to running where due."""
        if attempt.status == AttemptStatus.PREPARING:
            # Always running now; the rollout follows only while this attempt is its current one.
            params = {"p_rollout_id": attempt.rollout_id, "p_attempt_id": attempt.attempt_id}
            if statements.START_RUNNING.run(conn, params).rowcount:
                self._db.notify()
            return AttemptStatus.RUNNING
        if attempt.status == AttemptStatus.UNRESPONSIVE:
            rollout, current = self.get_rollout_and_current(conn, attempt.rollout_id)
            if current == attempt.attempt_id and rollout.status in (
                RolloutStatus.PREPARING,
                RolloutStatus.RUNNING,
            ):
                if rollout.status == RolloutStatus.PREPARING:
                    self.set_rollout(conn, rollout, RolloutStatus.RUNNING)
                return AttemptStatus.RUNNING
        return attempt.status

    # ---- endings -------------------------------------------------------------------------------

    def finish_attempt(
        self, conn: sa.Connection, attempt: Attempt, status: AttemptStatus, reason: str | None
    ) -> Attempt:
        """Move an attempt to `status` and carry its rollout along (requeue / fail / succeed)."""
        check_attempt_transition(attempt.attempt_id, attempt.status, status)
        now = self._db.now()
        end_time = now if status.terminal else attempt.end_time
        failure_reason = reason if reason is not None else attempt.failure_reason
        rollout, current = self.get_rollout_and_current(conn, attempt.rollout_id)
        if current == attempt.attempt_id and not rollout.status.terminal:
            target = self._rollout_target(rollout, status)
            if target is not None and target != rollout.status:
                check_rollout_transition(rollout.rollout_id, rollout.status, target)
                self.set_rollout(conn, rollout, target, reason if target == RolloutStatus.FAILED else None)
        statements.SET_ATTEMPT_END.run(
            conn,
            {
                "p_attempt_id": attempt.attempt_id,
                "p_status": status.value,
                "p_end_time": end_time,
                "p_failure_reason": failure_reason,
            },
        )
        if status.terminal and attempt.worker_id:
            self.touch_worker(conn, attempt.worker_id, WorkerStatus.IDLE, None, None)
        return attempt.model_copy(
            update={"status": status, "end_time": end_time, "failure_reason": failure_reason}
        )

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

    def set_rollout(
        self, conn: sa.Connection, rollout: Rollout, status: RolloutStatus, reason: str | None = None
    ) -> Rollout:
        """Write a rollout's new status; `rollout` must have been read in this transaction."""
        end_time = self._db.now() if status.terminal else rollout.end_time
        failure_reason = reason if reason is not None else rollout.failure_reason
        statements.SET_ROLLOUT_STATUS.run(
            conn,
            {
                "p_rollout_id": rollout.rollout_id,
                "p_status": status.value,
                "p_end_time": end_time,
                "p_failure_reason": failure_reason,
            },
        )
        self._db.notify()
        if status in (RolloutStatus.QUEUING, RolloutStatus.REQUEUING):
            self._db.queued(1)
        return rollout.model_copy(
            update={"status": status, "end_time": end_time, "failure_reason": failure_reason}
        )

    def close_current_attempt(self, conn: sa.Connection, rollout: Rollout, target: RolloutStatus) -> None:
        """When a caller moves a rollout to a terminal or requeuing state, end its open attempt."""
        if not (target.terminal or target == RolloutStatus.REQUEUING):
            return
        _, current_id = self.get_rollout_and_current(conn, rollout.rollout_id)
        if current_id is None:
            return
        attempt = self.get_attempt(conn, rollout.rollout_id, current_id)
        if attempt.status.terminal:
            return
        status = AttemptStatus.SUCCEEDED if target == RolloutStatus.SUCCEEDED else AttemptStatus.FAILED
        reason = None if status == AttemptStatus.SUCCEEDED else f"rollout moved to {target.value}"
        statements.SET_ATTEMPT_END.run(
            conn,
            {
                "p_attempt_id": current_id,
                "p_status": status.value,
                "p_end_time": self._db.now(),
                "p_failure_reason": reason,
            },
        )

    # ---- workers ---------------------------------------------------------------------------------

    def touch_worker(
        self,
        conn: sa.Connection,
        worker_id: str,
        status: WorkerStatus,
        rollout_id: str | None,
        attempt_id: str | None,
    ) -> None:
        statements.TOUCH_WORKER[self._db.dialect].run(
            conn,
            {
                "p_worker_id": worker_id,
                "p_status": status.value,
                "p_time": self._db.now(),
                "p_rollout_id": rollout_id,
                "p_attempt_id": attempt_id,
            },
        )
