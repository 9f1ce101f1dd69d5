"""SqlQueries: SqlStore's read queries (rollouts, attempts, spans and rewards)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import sqlalchemy as sa

from lightningstore.batch_read import checked_attempt, checked_attributes, distinct_ids
from lightningstore.data.attempt import Attempt
from lightningstore.data.reward import Reward
from lightningstore.data.rollout import Rollout
from lightningstore.data.span import Span
from lightningstore.data.status import RolloutMode, RolloutStatus
from lightningstore.data.store_request import RolloutQuery, SpanQuery, SpansManyQuery
from lightningstore.errors import InvalidInputError
from lightningstore.sql import statements, tables
from lightningstore.sql.database import parse_enum
from lightningstore.sql.part import SqlPart
from lightningstore.sql.prepared import Prepared
from lightningstore.sql.rows import attempt_from_row, reward_from_row, rollout_from_row, span_from_row

SORT_COLUMNS = {"enqueue_time", "start_time", "end_time", "rollout_id", "status"}


INLINE_SPANS = 32
"""A rollout with at most this many spans is read at once on the caller's thread (SqlDatabase.read)."""


@cache
def _spans_query(attempt: bool, name: bool, after: bool, limit: bool) -> Prepared:
    """The span query for one combination of filters, built once (its values are parameters)."""
    S = tables.spans
    query = sa.select(S).where(S.c.rollout_id == sa.bindparam("rollout_id"))
    if attempt:
        query = query.where(S.c.attempt_id == sa.bindparam("attempt_id"))
    if name:
        query = query.where(S.c.name == sa.bindparam("name"))
    if after:
        query = query.where(S.c.sequence_id > sa.bindparam("after"))
    query = query.order_by(S.c.sequence_id)
    return Prepared(query.limit(sa.bindparam("limit")) if limit else query)


class SqlQueries(SqlPart):
    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | None:
        def _tx(conn: sa.Connection) -> Rollout | None:
            row = statements.SELECT_ROLLOUT.run(conn, {"rollout_id": rollout_id}).first()
            return rollout_from_row(row) if row is not None else None

        return await self._db.read(_tx, small=True)

    async def _query_rollouts(self, asked: RolloutQuery) -> list[Rollout]:
        status, mode, rollout_ids, group_id = asked.status, asked.mode, asked.rollout_ids, asked.group_id
        sort_by, descending, limit, offset = asked.sort_by, asked.descending, asked.limit, asked.offset
        if sort_by not in SORT_COLUMNS:
            raise InvalidInputError("sort_by", f"must be one of {sorted(SORT_COLUMNS)}, got {sort_by!r}")
        if limit is not None and limit < 0:
            raise InvalidInputError("limit", f"must be >= 0, got {limit}")
        if offset < 0:
            raise InvalidInputError("offset", f"must be >= 0, got {offset}")
        if isinstance(status, str):
            status = [status]
        R = tables.rollouts
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
            rows = statements.SELECT_ATTEMPTS_OF.run(conn, {"rollout_id": rollout_id}).rows
            return [attempt_from_row(r) for r in rows]

        return await self._db.read(_tx)

    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        return await self._db.read(lambda conn: self._life.latest_attempt(conn, rollout_id), small=True)

    async def _query_spans(self, asked: SpanQuery) -> list[Span]:
        rollout_id, attempt_id, name = asked.rollout_id, asked.attempt_id, asked.name
        after_sequence_id, limit = asked.after_sequence_id, asked.limit
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

        def small(conn: sa.Connection) -> bool:
            count = statements.COUNT_ROLLOUT_SPANS.run(conn, {"rollout_id": rollout_id}).rows[0]["n"]
            return bool(count <= INLINE_SPANS)

        return await self._db.read(_tx, small=small)

    async def query_rewards(self, rollout_id: str, *, name: str | None = None) -> list[Reward]:
        query = sa.select(tables.rewards).where(tables.rewards.c.rollout_id == rollout_id)
        if name is not None:
            query = query.where(tables.rewards.c.name == name)

        def _tx(conn: sa.Connection) -> list[Reward]:
            return [reward_from_row(r._mapping) for r in conn.execute(query.order_by(tables.rewards.c.seq))]

        return await self._db.read(_tx)

    async def _query_spans_many(self, asked: SpansManyQuery) -> dict[str, list[Span]]:
        ids = distinct_ids(asked.rollout_ids)
        attempt = asked.attempt
        checked_attempt(attempt)
        keys = checked_attributes(asked.attributes)
        query = _spans_many_query(attempt == "latest", keys)

        def _tx(conn: sa.Connection) -> dict[str, list[Span]]:
            out: dict[str, list[Span]] = {rollout_id: [] for rollout_id in ids}
            for chunk in _statement_chunks(ids):
                for row in conn.execute(query, {"ids": chunk}):
                    span = _span_from_projection(row._mapping, keys)
                    out[span.rollout_id].append(span)
            return out

        return await self._db.read(_tx)

    async def query_rewards_many(self, rollout_ids: Sequence[str]) -> dict[str, list[Reward]]:
        ids = distinct_ids(rollout_ids)
        W = tables.rewards
        query = sa.select(W).where(W.c.rollout_id.in_(sa.bindparam("ids", expanding=True))).order_by(W.c.seq)

        def _tx(conn: sa.Connection) -> dict[str, list[Reward]]:
            out: dict[str, list[Reward]] = {rollout_id: [] for rollout_id in ids}
            for chunk in _statement_chunks(ids):
                for row in conn.execute(query, {"ids": chunk}):
                    reward = reward_from_row(row._mapping)
                    out[reward.rollout_id].append(reward)
            return out

        return await self._db.read(_tx)


IDS_PER_STATEMENT = 500
"""Ids bound in one IN list: SQLite builds before 3.32 allow 999 variables per statement."""


def _statement_chunks(ids: list[str]) -> list[list[str]]:
    return [ids[i : i + IDS_PER_STATEMENT] for i in range(0, len(ids), IDS_PER_STATEMENT)]


def _spans_many_query(latest: bool, keys: tuple[str, ...] | None) -> sa.Select[Any]:
    """Spans of the `ids` rollouts (each one's latest attempt only when `latest`) in sequence order;
    with `keys`, the attributes column is left out and each key is read as its own column."""
    S, A = tables.spans, tables.attempts
    columns: list[Any] = list(S.c)
    if keys is not None:
        columns = [c for c in S.c if c.key != "attributes"]
        columns += [S.c.attributes[key].label(f"attribute_{i}") for i, key in enumerate(keys)]
    query = sa.select(*columns).where(S.c.rollout_id.in_(sa.bindparam("ids", expanding=True)))
    if latest:
        newest = (
            sa.select(A.c.attempt_id)
            .where(A.c.rollout_id == S.c.rollout_id)
            .order_by(A.c.sequence_id.desc())
            .limit(1)
            .scalar_subquery()
        )
        query = query.where(S.c.attempt_id == newest)
    return query.order_by(S.c.sequence_id)


def _span_from_projection(row: Any, keys: tuple[str, ...] | None) -> Span:
    if keys is None:
        return span_from_row(row)
    fields = {name: value for name, value in row.items() if not name.startswith("attribute_")}
    values = (row[f"attribute_{i}"] for i in range(len(keys)))
    fields["attributes"] = {key: value for key, value in zip(keys, values, strict=True) if value is not None}
    return span_from_row(fields)
