"""SqlLifecycle: the rollout and attempt state machines inside a transaction, shared by the SqlStore parts."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from lightningstore.data.attempt import Attempt, AttemptedRollout
from lightningstore.data.rollout import Rollout
from lightningstore.data.status import (
    AttemptStatus,
    RolloutStatus,
    WorkerStatus,
    check_attempt_transition,
    check_rollout_transition,
)
from lightningstore.errors import ConflictError, NotFoundError
from lightningstore.sql import statements, tables
from lightningstore.sql.database import SqlDatabase, new_id
from lightningstore.sql.rows import attempt_from_row, rollout_from_row

_ATTEMPT_COLUMNS = tuple(column.key for column in tables.attempts.c)
_ROLLOUT_COLUMNS = tuple(column.key for column in tables.rollouts.c)


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

    def get_attempt_ending(
        self, conn: sa.Connection, rollout_id: str, attempt_id: str
    ) -> tuple[Attempt, tuple[Rollout, str | None]]:
        """`get_attempt`, with its rollout row-locked and that rollout's current attempt id read in the
        same round trip (what `finish_attempt` takes as `locked`)."""
        row = statements.SELECT_ATTEMPT_ENDING.run(conn, {"attempt_id": attempt_id}).first()
        if row is None:
            raise NotFoundError("attempt", attempt_id)
        attempt = attempt_from_row({key: row[key] for key in _ATTEMPT_COLUMNS})
        if attempt.rollout_id != rollout_id:
            raise NotFoundError("attempt", f"{attempt_id} of rollout {rollout_id}")
        rollout = {key: row[f"r_{key}"] for key in _ROLLOUT_COLUMNS}
        return attempt, (rollout_from_row(rollout), rollout["current_attempt_id"])

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
        if len(claimed) == 1 and worker_id is not None and self._db.dialect == "postgresql":
            (one,) = claimed
            attempt_row = one.attempt.model_dump(mode="json")
            statements.CLAIM_ONE.run(
                conn,
                {f"a_{key}": value for key, value in attempt_row.items()}
                | self._claim_params(one)
                | self._worker_params(worker_id, WorkerStatus.BUSY, one.rollout_id, one.attempt_id, "w_"),
            )
            return claimed
        statements.INSERT_ATTEMPT.run(conn, [c.attempt.model_dump(mode="json") for c in claimed])
        statements.CLAIM_ROLLOUT.run(conn, [self._claim_params(c) for c in claimed])
        if worker_id is not None:  # the worker ends up busy with the last rollout it claimed
            last = claimed[-1]
            self.touch_worker(conn, worker_id, WorkerStatus.BUSY, last.rollout_id, last.attempt_id)
        return claimed

    @staticmethod
    def _claim_params(claimed: AttemptedRollout) -> dict[str, Any]:
        return {
            "p_rollout_id": claimed.rollout_id,
            "p_num_attempts": claimed.rollout.num_attempts,
            "p_start_time": claimed.rollout.start_time,
            "p_attempt_id": claimed.attempt_id,
        }

    # ---- liveness --------------------------------------------------------------------------------

    def mark_alive(self, conn: sa.Connection, attempt: Attempt) -> Attempt:
        """Record liveness; preparing -> running, and revive unresponsive if still current."""
        now = self._db.now()
        status = self.wake(conn, attempt.status, attempt.rollout_id, attempt.attempt_id)
        statements.SET_ATTEMPT_ALIVE.run(
            conn, {"p_attempt_id": attempt.attempt_id, "p_status": status.value, "p_time": now}
        )
        return attempt.model_copy(update={"last_heartbeat_time": now, "status": status})

    def wake(
        self, conn: sa.Connection, status: AttemptStatus, rollout_id: str, attempt_id: str
    ) -> AttemptStatus:
        """The status a sign of life gives an attempt in `status` (the caller writes it); moves its
        rollout to running where due."""
        if status == AttemptStatus.PREPARING:
            # Always running now; the rollout follows only while this attempt is its current one.
            params = {"p_rollout_id": rollout_id, "p_attempt_id": attempt_id}
            if statements.START_RUNNING.run(conn, params).rowcount:
                self._db.notify()
            return AttemptStatus.RUNNING
        if status == AttemptStatus.UNRESPONSIVE:
            rollout, current = self.get_rollout_and_current(conn, rollout_id)
            if current == attempt_id and rollout.status in (
                RolloutStatus.PREPARING,
                RolloutStatus.RUNNING,
            ):
                if rollout.status == RolloutStatus.PREPARING:
                    self.set_rollout(conn, rollout, RolloutStatus.RUNNING)
                return AttemptStatus.RUNNING
        return status

    def revive(self, conn: sa.Connection, status: AttemptStatus, rollout_id: str, attempt_id: str) -> None:
        """`wake` for an attempt in `status`, writing its new status too (on PostgreSQL a preparing
        attempt's in the rollout's round trip)."""
        if status == AttemptStatus.PREPARING and self._db.dialect == "postgresql":
            params = {"p_rollout_id": rollout_id, "p_attempt_id": attempt_id}
            if statements.START_RUNNING_BOTH.run(conn, params).rowcount:
                self._db.notify()
            return
        woken = self.wake(conn, status, rollout_id, attempt_id)
        if woken != status:
            statements.SET_ATTEMPT_STATUS.run(conn, {"p_attempt_id": attempt_id, "p_status": woken.value})

    # ---- endings -------------------------------------------------------------------------------

    def finish_attempt(
        self,
        conn: sa.Connection,
        attempt: Attempt,
        status: AttemptStatus,
        reason: str | None,
        *,
        locked: tuple[Rollout, str | None] | None = None,
    ) -> Attempt:
        """Move an attempt to `status` and carry its rollout along (requeue / fail / succeed); `locked`:
        its rollout and current attempt id as `get_attempt_ending` read them in this transaction."""
        check_attempt_transition(attempt.attempt_id, attempt.status, status)
        now = self._db.now()
        end_time = now if status.terminal else attempt.end_time
        failure_reason = reason if reason is not None else attempt.failure_reason
        rollout, current = locked or self.get_rollout_and_current(conn, attempt.rollout_id)
        rollout_ending: dict[str, Any] = {}
        if current == attempt.attempt_id and not rollout.status.terminal:
            target = self._rollout_target(rollout, status)
            if target is not None and target != rollout.status:
                check_rollout_transition(rollout.rollout_id, rollout.status, target)
                reason_kept = reason if target == RolloutStatus.FAILED else None
                rollout_ending = self._rollout_ending(rollout, target, reason_kept)
        params: dict[str, Any] = {
            "p_attempt_id": attempt.attempt_id,
            "p_status": status.value,
            "p_end_time": end_time,
            "p_failure_reason": failure_reason,
        }
        worker_id = attempt.worker_id if status.terminal else None
        if self._db.dialect == "postgresql":  # the three writes in one round trip
            if rollout_ending:
                params |= {f"r_{key.removeprefix('p_')}": value for key, value in rollout_ending.items()}
            if worker_id:
                params |= self._worker_params(worker_id, WorkerStatus.IDLE, None, None, "w_")
            statements.ATTEMPT_ENDING[(bool(rollout_ending), bool(worker_id))].run(conn, params)
        else:
            if rollout_ending:
                statements.SET_ROLLOUT_STATUS.run(conn, rollout_ending)
            statements.SET_ATTEMPT_END.run(conn, params)
            if worker_id:
                self.touch_worker(conn, worker_id, WorkerStatus.IDLE, None, None)
        if rollout_ending:
            self._rollout_moved(RolloutStatus(rollout_ending["p_status"]))
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
        params = self._rollout_ending(rollout, status, reason)
        statements.SET_ROLLOUT_STATUS.run(conn, params)
        self._rollout_moved(status)
        return rollout.model_copy(
            update={
                "status": status,
                "end_time": params["p_end_time"],
                "failure_reason": params["p_failure_reason"],
            }
        )

    def _rollout_ending(self, rollout: Rollout, status: RolloutStatus, reason: str | None) -> dict[str, Any]:
        """SET_ROLLOUT_STATUS's parameters for moving `rollout` to `status`."""
        return {
            "p_rollout_id": rollout.rollout_id,
            "p_status": status.value,
            "p_end_time": self._db.now() if status.terminal else rollout.end_time,
            "p_failure_reason": reason if reason is not None else rollout.failure_reason,
        }

    def _rollout_moved(self, status: RolloutStatus) -> None:
        """Wake the store's waiters, and a waiting claim when the rollout is claimable again."""
        self._db.notify()
        if status in (RolloutStatus.QUEUING, RolloutStatus.REQUEUING):
            self._db.queued(1)

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
            conn, self._worker_params(worker_id, status, rollout_id, attempt_id)
        )

    def _worker_params(
        self,
        worker_id: str,
        status: WorkerStatus,
        rollout_id: str | None,
        attempt_id: str | None,
        prefix: str = "p_",
    ) -> dict[str, Any]:
        """TOUCH_WORKER's parameters (named `<prefix>...`)."""
        values = {
            "worker_id": worker_id,
            "status": status.value,
            "time": self._db.now(),
            "rollout_id": rollout_id,
            "attempt_id": attempt_id,
        }
        return {f"{prefix}{key}": value for key, value in values.items()}
