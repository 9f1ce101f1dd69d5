"""SpanWriter: how spans and rewards are stored inside a write transaction, for `add_many_spans`,
`add_reward` and `finish_attempt` alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from lightningstore.data.reward import Reward, RewardIn
from lightningstore.data.span import Span, SpanIn
from lightningstore.data.status import AttemptStatus
from lightningstore.errors import ConflictError, InvalidInputError, NotFoundError
from lightningstore.sql import statements
from lightningstore.sql.database import SqlDatabase, new_id
from lightningstore.sql.lifecycle import SqlLifecycle
from lightningstore.sql.rows import Row, reward_from_row, span_from_row

SpanKey = tuple[str, str]
"""(attempt_id, span_id): what makes a span unique."""
_WAKING = (AttemptStatus.PREPARING.value, AttemptStatus.UNRESPONSIVE.value)
"""The attempt statuses a span moves (its first span, or one after a silence)."""


def span_row(span: SpanIn) -> dict[str, Any]:
    """The spans-table row of a span, read straight off the validated model (no model_dump): the
    engine's JSON serializer turns the attribute values into JSON."""
    return {
        "rollout_id": span.rollout_id,
        "attempt_id": span.attempt_id,
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "parent_id": span.parent_id,
        "name": span.name,
        "kind": span.kind,
        "start_time": span.start_time,
        "end_time": span.end_time,
        "attributes": span.attributes,
        "events": [event.model_dump() for event in span.events],
        "status": span.status.model_dump(),
        "resource": span.resource,
    }


@dataclass(frozen=True)
class SpanBatch:
    """Spans to insert, checked and turned into rows before the write transaction starts."""

    spans: list[SpanIn]
    unique: dict[SpanKey, SpanIn]
    rows: list[dict[str, Any]]
    attempt_ids: list[str]

    @classmethod
    def of(cls, spans: Sequence[SpanIn]) -> SpanBatch:
        checked = [s if isinstance(s, SpanIn) else SpanIn.model_validate(s) for s in spans]
        unique: dict[SpanKey, SpanIn] = {}
        for span in checked:
            unique.setdefault((span.attempt_id, span.span_id), span)
        # Built here, not on the writer thread, so that it does not lengthen the write transaction.
        rows = [span_row(span) for span in unique.values()]
        return cls(checked, unique, rows, list({span.attempt_id for span in unique.values()}))


class SpanWriter:
    """Stores spans and rewards on a connection inside a write transaction; never opens one itself."""

    def __init__(self, db: SqlDatabase, life: SqlLifecycle) -> None:
        self._db = db
        self._life = life

    def store_spans(self, conn: sa.Connection, batch: SpanBatch) -> dict[SpanKey, Span]:
        """Insert a batch inside a write transaction: check and touch each attempt, wake preparing ones."""
        now = self._db.now()
        if len(batch.rows) == 1 and self._db.dialect == "postgresql":
            return self._store_one_span(conn, batch, now)
        # One statement per attempt checks it and records the spans as its heartbeat.
        owners: dict[str, Row] = {}
        for attempt_id in batch.attempt_ids:
            row = statements.TOUCH_ATTEMPT.run(conn, {"p_attempt_id": attempt_id, "p_time": now}).first()
            if row is not None:
                owners[attempt_id] = row
        self._check_span_owners(batch.unique.values(), owners)
        stored: dict[SpanKey, Span] = {}
        for r in statements.INSERT_SPANS[self._db.dialect].run(conn, batch.rows).rows:
            key = (r["attempt_id"], r["span_id"])
            # The SpanIn was validated when it came in: adding the sequence id needs no second pass.
            stored[key] = Span.model_construct(**batch.unique[key].__dict__, sequence_id=r["sequence_id"])
        repeats = [key for key in batch.unique if key not in stored]
        if repeats:  # a repeat returns the stored copy, not the one sent again
            stored.update(self._select_spans(conn, repeats))
        for owner in owners.values():
            self._wake_by_span(conn, owner)
        return stored

    def _store_one_span(self, conn: sa.Connection, batch: SpanBatch, now: float) -> dict[SpanKey, Span]:
        """PostgreSQL, one span (the proxy's and the tracer's usual call): touch, check and insert in one
        round trip, then wake the attempt as `store_spans` does."""
        ((key, span),) = batch.unique.items()
        params = {**batch.rows[0], "p_attempt_id": span.attempt_id, "p_time": now}
        owner = statements.TOUCH_AND_INSERT_SPAN.run(conn, params).first()
        self._check_span_owners([span], {span.attempt_id: owner} if owner is not None else {})
        assert owner is not None
        if owner["sequence_id"] is None:  # a repeat returns the stored copy, not the one sent again
            stored = self._select_spans(conn, [key])
        else:
            stored = {key: Span.model_construct(**span.__dict__, sequence_id=owner["sequence_id"])}
        self._wake_by_span(conn, owner)
        return stored

    @staticmethod
    def _check_span_owners(spans: Any, owners: dict[str, Row]) -> None:
        for span in spans:
            owner = owners.get(span.attempt_id)
            if owner is None:
                raise NotFoundError("attempt", span.attempt_id)
            if owner["rollout_id"] != span.rollout_id:
                raise InvalidInputError(
                    "rollout_id",
                    f"attempt {span.attempt_id!r} belongs to rollout {owner['rollout_id']!r}, not {span.rollout_id!r}",
                )

    def _wake_by_span(self, conn: sa.Connection, owner: Row) -> None:
        """The first span of a preparing attempt (or one of an unresponsive one) moves it."""
        if owner["status"] in _WAKING:
            self._life.revive(conn, AttemptStatus(owner["status"]), owner["rollout_id"], owner["attempt_id"])

    def _select_spans(self, conn: sa.Connection, keys: list[SpanKey]) -> dict[SpanKey, Span]:
        result: dict[SpanKey, Span] = {}
        by_attempt: dict[str, list[str]] = {}
        for attempt_id, span_id in keys:
            by_attempt.setdefault(attempt_id, []).append(span_id)
        for attempt_id, span_ids in by_attempt.items():
            rows = conn.execute(
                statements.SELECT_SPANS_BY_ID, {"attempt_id": attempt_id, "span_ids": span_ids}
            )
            for span in (span_from_row(row._mapping) for row in rows):
                result[(span.attempt_id, span.span_id)] = span
        return result

    def store_reward(self, conn: sa.Connection, reward: RewardIn) -> Reward:
        """Insert a reward inside a write transaction (idempotent on `reward_id`)."""
        self._life.get_rollout(conn, reward.rollout_id)
        if reward.attempt_id is not None:
            self._life.get_attempt(conn, reward.rollout_id, reward.attempt_id)
        if reward.reward_id is not None:
            row = statements.SELECT_REWARD.run(conn, {"reward_id": reward.reward_id}).first()
            if row is not None:
                stored = reward_from_row(row)
                if stored.value != reward.value or stored.rollout_id != reward.rollout_id:
                    raise ConflictError(f"reward {reward.reward_id!r} already exists with other content")
                return stored
        stored = Reward(
            **{**reward.model_dump(), "reward_id": reward.reward_id or new_id("rw")},
            create_time=self._db.now(),
        )
        conn.execute(statements.INSERT_REWARD, [stored.model_dump(mode="json")])
        return stored
