"""SqlWorkers: SqlStore's workers and statistics."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from lightningstore.data.statistics import StoreStatistics
from lightningstore.data.status import WorkerStatus
from lightningstore.data.store_request import WorkerUpdate
from lightningstore.data.unset import UNSET
from lightningstore.data.worker import Worker
from lightningstore.errors import InvalidInputError
from lightningstore.finite import refuse_non_finite
from lightningstore.sql import statements, tables
from lightningstore.sql.database import parse_enum
from lightningstore.sql.part import SqlPart
from lightningstore.sql.rows import worker_from_row


class SqlWorkers(SqlPart):
    async def _update_worker(self, update: WorkerUpdate) -> Worker:
        worker_id, status, metadata = update.worker_id, update.status, update.metadata
        if not worker_id:
            raise InvalidInputError("worker_id", "must not be empty")
        new_status = parse_enum(WorkerStatus, status, "status") if status is not UNSET else UNSET
        refuse_non_finite(metadata, "metadata")

        def _tx(conn: sa.Connection) -> Worker:
            row = statements.SELECT_WORKER.run(conn, {"worker_id": worker_id}).first()
            worker = worker_from_row(row) if row is not None else Worker(worker_id=worker_id)
            update: dict[str, Any] = {"last_heartbeat_time": self._db.now()}
            if new_status is not UNSET:
                update["status"] = new_status
            if metadata is not UNSET:
                update["metadata"] = metadata
            worker = worker.model_copy(update=update)
            data = worker.model_dump(mode="json")
            if row is None:
                conn.execute(sa.insert(tables.workers), [data])
            else:
                conn.execute(
                    sa.update(tables.workers).where(tables.workers.c.worker_id == worker_id).values(**data)
                )
            return worker

        return await self._db.write(_tx)

    async def query_workers(self) -> list[Worker]:
        def _tx(conn: sa.Connection) -> list[Worker]:
            return [
                worker_from_row(r._mapping)
                for r in conn.execute(sa.select(tables.workers).order_by(tables.workers.c.worker_id))
            ]

        return await self._db.read(_tx)

    async def statistics(self) -> StoreStatistics:
        def _tx(conn: sa.Connection) -> StoreStatistics:
            def count(table: sa.Table) -> int:
                return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()

            def by_status(table: sa.Table) -> dict[str, int]:
                rows = conn.execute(sa.select(table.c.status, sa.func.count()).group_by(table.c.status))
                return {status: n for status, n in rows}

            rollouts_by_status = by_status(tables.rollouts)
            attempts_by_status = by_status(tables.attempts)
            return StoreStatistics(
                rollouts_by_status=rollouts_by_status,
                attempts_by_status=attempts_by_status,
                total_rollouts=sum(rollouts_by_status.values()),
                total_attempts=sum(attempts_by_status.values()),
                total_spans=count(tables.spans),
                total_rewards=count(tables.rewards),
                total_workers=count(tables.workers),
                total_resource_versions=count(tables.resource_versions),
            )

        return await self._db.read(_tx)
