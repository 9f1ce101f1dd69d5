"""SqlSpans: SqlStore's spans and rewards."""

from __future__ import annotations

from collections.abc import Sequence

from lightningstore.data.reward import Reward, RewardIn
from lightningstore.data.span import Span, SpanIn
from lightningstore.sql.part import SqlPart
from lightningstore.sql.span_writer import SpanBatch


class SqlSpans(SqlPart):
    async def add_many_spans(self, spans: Sequence[SpanIn]) -> list[Span]:
        batch = SpanBatch.of(spans)
        if not batch.unique:
            return []
        stored = await self._db.write(
            lambda conn: self._span_writer.store_spans(conn, batch), rows=len(batch.rows)
        )
        return [stored[(s.attempt_id, s.span_id)] for s in batch.spans]

    async def add_reward(self, reward: RewardIn) -> Reward:
        reward = reward if isinstance(reward, RewardIn) else RewardIn.model_validate(reward)
        return await self._db.write(lambda conn: self._span_writer.store_reward(conn, reward))
