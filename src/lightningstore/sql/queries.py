"""SqlQueries: the read queries of SqlStore (rollouts, attempts, spans and rewards)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, Literal

import sqlalchemy as sa

from lightningstore.attempt import Attempt
from lightningstore.errors import InvalidInputError
from lightningstore.reward import Reward
from lightningstore.rollout import Rollout
from lightningstore.span import Span
from lightningstore.sql import statements as q
from lightningstore.sql import tables as t
from lightningstore.sql.database import SqlDatabase, parse_enum
from lightningstore.sql.lifecycle import SqlLifecycle
from lightningstore.sql.prepared import Prepared
from lightningstore.sql.rows import attempt_from_row, reward_from_row, rollout_from_row, span_from_row
from lightningstore.status import RolloutMode, RolloutStatus
from lightningstore.store import RolloutSortKey

SORT_COLUMNS = {"enqueue_time", "start_time", "end_time", "rollout_id", "status"}


@cache
def _spans_query(attempt: bool, name: bool, after: bool, limit: bool) -> Prepared:
    """The span query for one combination of filters, built once (its values are parameters)."""
    S = t.spans
    query = sa.select(S).where(S.c.rollout_id == sa.bindparam("rollout_id"))
    if attempt:
        query = query.where(S.c.attempt_id == sa.bindparam("attempt_id"))
    if name:
        query = query.where(S.c.name == sa.bindparam("name"))
    if after:
        query = query.where(S.c.sequence_id > sa.bindparam("after"))
    query = query.order_by(S.c.sequence_id)
    return Prepared(query.limit(sa.bindparam("limit")) if limit else query)


class SqlQueries:
    def __init__(self, db: SqlDatabase, life: SqlLifecycle) -> None:
        self._db = db
        self._life = life

    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | None:
        def _tx(conn: sa.Connection) -> Rollout | None:
            row = q.SELECT_ROLLOUT.run(conn, {"rollout_id": rollout_id}).first()
            return rollout_from_row(row) if row is not None else None

        return await self._db.read(_tx)

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
        R = t.rollouts
        query = sa.select(R)
        if status is not None:
            query = query.where(
                R.c.status.in_([parse_enum(RolloutStatus, s, "status").value for s in status])
            )
        if mode is not None:
            query = query.where(R.c.mode == parse_enum(RolloutMode, mode, "mode").value)
        if rollout_ids is not None:
            query = query.where(R.c.rollout_id.in_(list(rollout_ids)))
        if group_id is not None:
            query = query.where(R.c.group_id == group_id)
        column = R.c[sort_by]
        secondary = R.c.queue_seq if sort_by == "enqueue_time" else R.c.rollout_id
        if descending:
            query = query.order_by(column.desc(), secondary.desc())
        else:
            query = query.order_by(column, secondary)
        query = query.offset(offset)
        if limit is not None:
            query = query.limit(limit)

        def _tx(conn: sa.Connection) -> list[Rollout]:
            return [rollout_from_row(r._mapping) for r in conn.execute(query)]

        return await self._db.read(_tx)

    async def query_attempts(self, rollout_id: str) -> list[Attempt]:
        def _tx(conn: sa.Connection) -> list[Attempt]:
            self._life.get_rollout(conn, rollout_id)
            rows = q.SELECT_ATTEMPTS_OF.run(conn, {"rollout_id": rollout_id}).rows
            return [attempt_from_row(r) for r in rows]

        return await self._db.read(_tx)

    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        return await self._db.read(lambda conn: self._life.latest_attempt(conn, rollout_id))

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
        query = _spans_query(
            attempt_id is not None, name is not None, after_sequence_id is not None, limit is not None
        )
        params: dict[str, Any] = {
            "rollout_id": rollout_id,
            "attempt_id": attempt_id,
            "name": name,
            "after": after_sequence_id,
            "limit": limit,
        }

        def _tx(conn: sa.Connection) -> list[Span]:
            if attempt_id == "latest":
                latest = self._life.latest_attempt(conn, rollout_id)
                if latest is None:
                    return []
                params["attempt_id"] = latest.attempt_id
            return [span_from_row(r) for r in query.run(conn, params).rows]

        return await self._db.read(_tx)

    async def query_rewards(self, rollout_id: str, *, name: str | None = None) -> list[Reward]:
        query = sa.select(t.rewards).where(t.rewards.c.rollout_id == rollout_id)
        if name is not None:
            query = query.where(t.rewards.c.name == name)

        def _tx(conn: sa.Connection) -> list[Reward]:
            return [reward_from_row(r._mapping) for r in conn.execute(query.order_by(t.rewards.c.seq))]

        return await self._db.read(_tx)
