"""The statements of SqlStore's hot paths, built once.

Building a statement per call (`sa.update(...).where(...).values(...)`) costs several times more
SQLAlchemy construction and cache-key work than executing a prebuilt one with bound parameters,
and `Prepared` cuts the execution further on SQLite. Parameters of UPDATE/INSERT statements are
named `p_*`: SQLAlchemy reserves the column names for its own SET/VALUES parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from lightningstore.data.status import TERMINAL_ATTEMPT, AttemptStatus, RolloutStatus
from lightningstore.sql import tables
from lightningstore.sql.prepared import Prepared

R, A, S, W = tables.rollouts, tables.attempts, tables.spans, tables.workers
_b = sa.bindparam

WAITING = (RolloutStatus.QUEUING.value, RolloutStatus.REQUEUING.value)
OPEN_ATTEMPT = (AttemptStatus.PREPARING.value, AttemptStatus.RUNNING.value, AttemptStatus.UNRESPONSIVE.value)


def is_one_of(column: sa.ColumnElement[Any], values: Iterable[str]) -> sa.ColumnElement[bool]:
    """`column IN ('a', 'b')` with the constants in the SQL text: a bound IN list would be
    re-rendered on every execution."""
    return column.in_([sa.literal_column(f"'{value}'") for value in values])


# ---- rollouts -------------------------------------------------------------------------------

_SELECT_ROLLOUT = sa.select(R).where(R.c.rollout_id == _b("rollout_id"))
SELECT_ROLLOUT = Prepared(_SELECT_ROLLOUT)
SELECT_ROLLOUT_FOR_UPDATE = Prepared(_SELECT_ROLLOUT.with_for_update())
MAX_QUEUE_SEQ = Prepared(sa.select(sa.func.coalesce(sa.func.max(R.c.queue_seq), 0).label("max_seq")))
INSERT_ROLLOUT = Prepared(sa.insert(R), column_keys=[c.key for c in R.c if c.key != "current_attempt_id"])
"""A new rollout's row: the fields of `Rollout` plus its `queue_seq` (it has no current attempt yet)."""
_NEW_ROLLOUT_COLUMNS = [c.key for c in R.c if c.key not in ("current_attempt_id", "queue_seq")]
INSERT_ROLLOUT_IF_NEW = Prepared(
    postgresql.insert(R)
    .values(
        {key: _b(key, type_=R.c[key].type) for key in _NEW_ROLLOUT_COLUMNS}
        | {"queue_seq": sa.select(sa.func.coalesce(sa.func.max(R.c.queue_seq), 0) + 1).scalar_subquery()}
    )
    .on_conflict_do_nothing(index_elements=["rollout_id"])
    .returning(R.c.rollout_id)
)
"""PostgreSQL: one new rollout (a `Rollout`'s fields) at the end of the queue in one round trip; no row
back when its id is already stored."""


def _set_ending(table: sa.Table, key: str, prefix: str = "p_") -> sa.Update:
    """Set the status, end time and failure reason of the row whose `key` is bound as `<prefix><key>`
    (and the values as `<prefix>status`, ...)."""
    return (
        sa.update(table)
        .where(table.c[key] == _b(f"{prefix}{key}"))
        .values(
            status=_b(f"{prefix}status"),
            end_time=_b(f"{prefix}end_time"),
            failure_reason=_b(f"{prefix}failure_reason"),
        )
    )


SET_ROLLOUT_STATUS = Prepared(_set_ending(R, "rollout_id"))
# The rollout follows its attempt from preparing to running only while that attempt is current.
_START_RUNNING = (
    sa.update(R)
    .where(
        R.c.rollout_id == _b("p_rollout_id"),
        R.c.current_attempt_id == _b("p_attempt_id"),
        R.c.status == RolloutStatus.PREPARING.value,
    )
    .values(status=RolloutStatus.RUNNING.value)
)
START_RUNNING = Prepared(_START_RUNNING)
_CLAIM_ROLLOUT = (
    sa.update(R)
    .where(R.c.rollout_id == _b("p_rollout_id"))
    .values(
        status=RolloutStatus.PREPARING.value,
        num_attempts=_b("p_num_attempts"),
        start_time=_b("p_start_time"),
        current_attempt_id=_b("p_attempt_id"),
    )
)
CLAIM_ROLLOUT = Prepared(_CLAIM_ROLLOUT)


def _oldest_waiting_sqlite() -> sa.Select[Any]:
    # One index walk per waiting status, merged: `status IN (...) ORDER BY queue_seq` makes
    # SQLite sort every waiting row (thousands) to find the oldest one.
    def oldest(status: str) -> sa.Subquery:
        return (
            sa.select(R)
            .where(R.c.status == status)
            .order_by(R.c.queue_seq, R.c.rollout_id)
            .limit(_b("limit"))
            .subquery()
        )

    both = sa.union_all(*(sa.select(oldest(status)) for status in WAITING)).subquery()
    return sa.select(both).order_by(both.c.queue_seq, both.c.rollout_id).limit(_b("limit"))


# PostgreSQL locks the rows it claims and skips rows another transaction is claiming; SQLite's
# BEGIN IMMEDIATE already makes the writer exclusive.
OLDEST_WAITING = {
    "sqlite": Prepared(_oldest_waiting_sqlite()),
    "postgresql": Prepared(
        sa.select(R)
        .where(is_one_of(R.c.status, WAITING))
        .order_by(R.c.queue_seq, R.c.rollout_id)
        .limit(_b("limit"))
        .with_for_update(skip_locked=True)
    ),
}

# ---- attempts -------------------------------------------------------------------------------

SELECT_ATTEMPT = Prepared(sa.select(A).where(A.c.attempt_id == _b("attempt_id")))
SELECT_ATTEMPT_ENDING = Prepared(
    sa.select(A, *(column.label(f"r_{column.key}") for column in R.c))
    .join(R, R.c.rollout_id == A.c.rollout_id)
    .where(A.c.attempt_id == _b("attempt_id"))
    .with_for_update(of=R)
)
"""An attempt and its rollout (`r_<column>`, row-locked as SELECT_ROLLOUT_FOR_UPDATE) in one read: what
ending the attempt reads."""
SELECT_LATEST_ATTEMPT = Prepared(
    sa.select(A).where(A.c.rollout_id == _b("rollout_id")).order_by(A.c.sequence_id.desc()).limit(1)
)
SELECT_ATTEMPTS_OF = Prepared(
    sa.select(A).where(A.c.rollout_id == _b("rollout_id")).order_by(A.c.sequence_id)
)
INSERT_ATTEMPT = Prepared(sa.insert(A), column_keys=[c.key for c in A.c])
SET_ATTEMPT_ALIVE = Prepared(
    sa.update(A)
    .where(A.c.attempt_id == _b("p_attempt_id"))
    .values(status=_b("p_status"), last_heartbeat_time=_b("p_time"))
)
SET_ATTEMPT_STATUS = Prepared(
    sa.update(A).where(A.c.attempt_id == _b("p_attempt_id")).values(status=_b("p_status"))
)
SET_ATTEMPT_END = Prepared(_set_ending(A, "attempt_id"))
# A span is a heartbeat of its attempt unless the attempt has ended; its owner and status come
# back either way, to check the spans against it.
_TOUCH_ATTEMPT = (
    sa.update(A)
    .where(A.c.attempt_id == _b("p_attempt_id"))
    .values(
        last_heartbeat_time=sa.case(
            (is_one_of(A.c.status, [s.value for s in TERMINAL_ATTEMPT]), A.c.last_heartbeat_time),
            else_=_b("p_time", type_=tables.Time),
        )
    )
    .returning(A.c.attempt_id, A.c.rollout_id, A.c.status)
)
TOUCH_ATTEMPT = Prepared(_TOUCH_ATTEMPT)
_RUNNING_ATTEMPT = (
    sa.update(A)
    .where(A.c.attempt_id == _b("p_attempt_id"))
    .values(status=AttemptStatus.RUNNING.value)
    .returning(A.c.attempt_id)
    .cte("running_attempt")
)
START_RUNNING_BOTH = Prepared(_START_RUNNING.add_cte(_RUNNING_ATTEMPT))
"""PostgreSQL: a preparing attempt's first sign of life in one round trip: the attempt runs (its
CTE), and its rollout follows while the attempt is current (the rowcount says whether it did)."""
_TIMEOUT = R.c.config["timeout_seconds"].as_float()
_UNRESPONSIVE = R.c.config["unresponsive_seconds"].as_float()
SELECT_STALE_ATTEMPTS = Prepared(
    sa.select(A, R.c.config.label("rollout_config"))
    .join(R, R.c.rollout_id == A.c.rollout_id)
    .where(is_one_of(A.c.status, OPEN_ATTEMPT))
    # The watchdog's two rules, decided by the database: only attempts past a limit come back, so
    # the sweep never loads and validates every open attempt inside a write.
    .where(
        sa.or_(
            sa.and_(_TIMEOUT.is_not(None), A.c.start_time + _TIMEOUT < sa.bindparam("now")),
            sa.and_(
                _UNRESPONSIVE.is_not(None),
                A.c.status != AttemptStatus.UNRESPONSIVE.value,
                sa.func.coalesce(A.c.last_heartbeat_time, A.c.start_time) + _UNRESPONSIVE
                < sa.bindparam("now"),
            ),
        )
    )
)

# ---- spans and rewards ------------------------------------------------------------------------

SPAN_COLUMNS = [c.key for c in S.c if c.key != "sequence_id"]


def _insert_spans(insert: Callable[[sa.Table], Any]) -> Prepared:
    # A repeated (attempt_id, span_id) inserts nothing and returns no row: the caller reads it.
    stmt = (
        insert(S)
        .on_conflict_do_nothing(index_elements=["attempt_id", "span_id"])
        .returning(S.c.attempt_id, S.c.span_id, S.c.sequence_id)
    )
    return Prepared(stmt, column_keys=SPAN_COLUMNS)


COUNT_ROLLOUT_SPANS = Prepared(
    sa.select(sa.func.count().label("n")).select_from(S).where(S.c.rollout_id == _b("rollout_id"))
)
INSERT_SPANS = {"sqlite": _insert_spans(sqlite.insert), "postgresql": _insert_spans(postgresql.insert)}


def _touch_and_insert_span() -> Prepared:
    owner = _TOUCH_ATTEMPT.cte("owner")
    # Cast, as a SELECT list's parameters have no column type to take (a NULL time would be text).
    span = sa.select(*(sa.cast(_b(key, type_=S.c[key].type), S.c[key].type) for key in SPAN_COLUMNS)).where(
        owner.c.rollout_id == _b("rollout_id", type_=S.c.rollout_id.type)
    )
    inserted = (
        postgresql.insert(S)
        .from_select(SPAN_COLUMNS, span)
        .on_conflict_do_nothing(index_elements=["attempt_id", "span_id"])
        .returning(S.c.sequence_id)
        .cte("inserted")
    )
    return Prepared(
        sa.select(
            owner.c.attempt_id,
            owner.c.rollout_id,
            owner.c.status,
            sa.select(inserted.c.sequence_id).scalar_subquery().label("sequence_id"),
        )
    )


TOUCH_AND_INSERT_SPAN = _touch_and_insert_span()
"""PostgreSQL: one span and its attempt's heartbeat (as TOUCH_ATTEMPT) in one round trip. The span is
inserted only when the attempt belongs to its rollout; the row back names the attempt's owner and
status (no row: no such attempt) and the span's new sequence id (NULL: not inserted, i.e. a repeat of
a stored span, or the attempt is another rollout's)."""
SELECT_SPANS_BY_ID = sa.select(S).where(
    S.c.attempt_id == _b("attempt_id"), S.c.span_id.in_(_b("span_ids", expanding=True))
)
SELECT_REWARD = Prepared(sa.select(tables.rewards).where(tables.rewards.c.reward_id == _b("reward_id")))
INSERT_REWARD = sa.insert(tables.rewards)

# ---- workers ------------------------------------------------------------------------------------

_WORKER_STATE = ("status", "last_heartbeat_time", "current_rollout_id", "current_attempt_id")


def _touch_worker_stmt(insert: Callable[[sa.Table], Any], prefix: str = "p_") -> sa.Insert:
    """Create the worker (empty metadata) or set its state, keeping its metadata."""
    stmt = insert(W).values(
        worker_id=_b(f"{prefix}worker_id"),
        status=_b(f"{prefix}status"),
        last_heartbeat_time=_b(f"{prefix}time"),
        current_rollout_id=_b(f"{prefix}rollout_id"),
        current_attempt_id=_b(f"{prefix}attempt_id"),
        metadata={},
    )
    return stmt.on_conflict_do_update(
        index_elements=["worker_id"], set_={name: stmt.excluded[name] for name in _WORKER_STATE}
    )


TOUCH_WORKER = {
    "sqlite": Prepared(_touch_worker_stmt(sqlite.insert)),
    "postgresql": Prepared(_touch_worker_stmt(postgresql.insert)),
}
SELECT_WORKER = Prepared(sa.select(W).where(W.c.worker_id == _b("worker_id")))

# ---- PostgreSQL: a store call's writes in one round trip ------------------------------------------
# Each data-modifying CTE runs exactly once, whatever the main statement reads of it; parameters are
# named by the part they belong to (`a_`: the new attempt, `r_`: the rollout, `w_`: the worker).

CLAIM_ONE = Prepared(
    _touch_worker_stmt(postgresql.insert, "w_")
    .add_cte(sa.insert(A).values({c.key: _b(f"a_{c.key}", type_=c.type) for c in A.c}).cte("new_attempt"))
    .add_cte(_CLAIM_ROLLOUT.cte("claimed_rollout"))
)
"""One claimed rollout: its new attempt (`a_<column>`), the rollout's claim (as CLAIM_ROLLOUT) and its
worker busy (`w_`, as TOUCH_WORKER)."""


def _attempt_ending(rollout: bool, worker: bool) -> Prepared:
    stmt = _set_ending(A, "attempt_id")
    if rollout:
        stmt = stmt.add_cte(_set_ending(R, "rollout_id", "r_").cte("ended_rollout"))
    if worker:
        stmt = stmt.add_cte(_touch_worker_stmt(postgresql.insert, "w_").cte("idle_worker"))
    return Prepared(stmt)


ATTEMPT_ENDING = {
    (rollout, worker): _attempt_ending(rollout, worker) for rollout in (0, 1) for worker in (0, 1)
}
"""(rollout moves, worker touched) -> SET_ATTEMPT_END with the rollout's ending (`r_`, as
SET_ROLLOUT_STATUS) and the worker's state (`w_`, as TOUCH_WORKER) where they are due."""
