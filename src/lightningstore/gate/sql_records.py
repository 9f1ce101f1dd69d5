"""SqlGateRecords: GateRecords in the SqlStore's database, through the store's own transactions."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa
from pydantic import BaseModel, TypeAdapter

from lightningstore.errors import ConflictError, NotFoundError
from lightningstore.gate import tables as gate_tables
from lightningstore.gate.evaluator import Evaluator
from lightningstore.gate.evidence import Evidence, EvidenceKind, EvidenceRecord
from lightningstore.gate.plan import PlanBody, TrainingPlan
from lightningstore.gate.policy import GatePolicy
from lightningstore.gate.protected import ProtectedCase
from lightningstore.gate.receipt import Filed, ReceiptBody, UpdateReceipt
from lightningstore.gate.records import GateRecords
from lightningstore.gate.verdict import GateReport
from lightningstore.sql.database import SqlDatabase

_evidence = TypeAdapter(Evidence)
M = TypeVar("M", bound=BaseModel)
F = TypeVar("F", bound=Filed)
_FILED: dict[type[Filed], sa.Table] = {
    UpdateReceipt: gate_tables.gate_receipts,
    TrainingPlan: gate_tables.gate_plans,
}


def _first_body(conn: sa.Connection, query: sa.Select, model: type[M]) -> M | None:
    """The `body` of the query's first row as `model`, or None when there is no row."""
    row = conn.execute(query).first()
    return model.model_validate(row.body) if row is not None else None


def _bodies(conn: sa.Connection, query: sa.Select, model: type[M]) -> list[M]:
    """The `body` of every row of the query, as `model`."""
    return [model.model_validate(row.body) for row in conn.execute(query)]


def _row(table: sa.Table, record: BaseModel) -> dict[str, object]:
    """The table's columns from the record's fields of the same names, and the record as `body`."""
    dumped = record.model_dump(mode="json")
    row: dict[str, object] = {c.key: dumped[c.key] for c in table.c if c.key in dumped and c.key != "body"}
    return {**row, "body": dumped}


def _add_once(record: F) -> Callable[[sa.Connection], F]:
    """A transaction filing a content-addressed record once: the stored one if its id is taken."""
    table = _FILED[type(record)]

    def tx(conn: sa.Connection) -> F:
        query = sa.select(table.c.body).where(table.c[record.id_field] == getattr(record, record.id_field))
        stored = _first_body(conn, query, type(record))
        if stored is not None:
            return stored
        conn.execute(sa.insert(table).values(**_row(table, record)))
        return record

    return tx


def _put(table: sa.Table, record: M, recorded_by: str, **key: str) -> Callable[[sa.Connection], M]:
    """A transaction creating or replacing the row of `record` at `key` (its columns and values)."""
    values = {"body": record.model_dump(mode="json"), "recorded_by": recorded_by, "update_time": time.time()}
    where = [table.c[name] == value for name, value in key.items()]

    def tx(conn: sa.Connection) -> M:
        if conn.execute(sa.update(table).where(*where).values(**values)).rowcount == 0:
            conn.execute(sa.insert(table).values(**key, **values))
        return record

    return tx


class SqlGateRecords(GateRecords):
    """Gate records in the store's database. `SqlGateRecords(sql_store.database)`."""

    def __init__(self, database: SqlDatabase) -> None:
        # The store's own transactions: on SQLite, gate writes queue with the store's writes on
        # its one writer thread instead of competing with it for the database lock.
        self._db = database

    async def _get_filed(self, model: type[F], ident: str) -> F | None:
        table = _FILED[model]
        query = sa.select(table.c.body).where(table.c[model.id_field] == ident)
        return await self._db.read(lambda conn: _first_body(conn, query, model))

    @staticmethod
    def _append(table: sa.Table, record: M) -> Callable[[sa.Connection], M]:
        """A transaction appending `record` to its receipt's rows (NotFoundError for no such receipt)."""
        receipts = gate_tables.gate_receipts
        row = _row(table, record)

        def tx(conn: sa.Connection) -> M:
            query = sa.select(receipts.c.receipt_id).where(receipts.c.receipt_id == row["receipt_id"])
            if conn.execute(query).first() is None:
                raise NotFoundError("receipt", str(row["receipt_id"]))
            conn.execute(sa.insert(table).values(**row))
            return record

        return tx

    # ---- receipts ------------------------------------------------------------------------------

    async def add_receipt(self, body: ReceiptBody, *, created_by: str) -> UpdateReceipt:
        return await self._db.write(_add_once(UpdateReceipt.file(body, created_by=created_by)))

    async def get_receipt(self, receipt_id: str) -> UpdateReceipt | None:
        return await self._get_filed(UpdateReceipt, receipt_id)

    async def list_receipts(
        self, *, resource_name: str | None = None, candidate_version_id: str | None = None
    ) -> list[UpdateReceipt]:
        query = sa.select(gate_tables.gate_receipts.c.body).order_by(
            gate_tables.gate_receipts.c.create_time, gate_tables.gate_receipts.c.receipt_id
        )
        if resource_name is not None:
            query = query.where(gate_tables.gate_receipts.c.resource_name == resource_name)
        if candidate_version_id is not None:
            query = query.where(gate_tables.gate_receipts.c.candidate_version_id == candidate_version_id)
        return await self._db.read(lambda conn: _bodies(conn, query, UpdateReceipt))

    # ---- training plans ----------------------------------------------------------------------------

    async def add_plan(self, body: PlanBody, *, created_by: str) -> TrainingPlan:
        return await self._db.write(_add_once(TrainingPlan.file(body, created_by=created_by)))

    async def get_plan(self, plan_id: str) -> TrainingPlan | None:
        return await self._get_filed(TrainingPlan, plan_id)

    # ---- reports and evidence ----------------------------------------------------------------------

    async def add_report(self, report: GateReport) -> GateReport:
        report = report.model_copy(update={"create_time": report.create_time or time.time()})
        return await self._db.write(self._append(gate_tables.gate_reports, report))

    async def list_reports(self, receipt_id: str) -> list[GateReport]:
        query = (
            sa.select(gate_tables.gate_reports.c.body)
            .where(gate_tables.gate_reports.c.receipt_id == receipt_id)
            .order_by(gate_tables.gate_reports.c.seq)
        )
        return await self._db.read(lambda conn: _bodies(conn, query, GateReport))

    async def add_evidence(self, body: Evidence, *, recorded_by: str) -> EvidenceRecord:
        record = EvidenceRecord(
            evidence_id=f"ev-{uuid.uuid4().hex[:16]}",
            kind=EvidenceKind(body.kind),
            receipt_id=body.receipt_id,
            body=_evidence.validate_python(body.model_dump()),
            recorded_by=recorded_by,
            create_time=time.time(),
        )
        return await self._db.write(self._append(gate_tables.gate_evidence, record))

    async def list_evidence(self, receipt_id: str, kind: EvidenceKind | None = None) -> list[EvidenceRecord]:
        query = (
            sa.select(gate_tables.gate_evidence.c.body)
            .where(gate_tables.gate_evidence.c.receipt_id == receipt_id)
            .order_by(gate_tables.gate_evidence.c.seq)
        )
        if kind is not None:
            query = query.where(gate_tables.gate_evidence.c.kind == EvidenceKind(kind).value)
        return await self._db.read(lambda conn: _bodies(conn, query, EvidenceRecord))

    # ---- evaluators, protected cases, policies ----------------------------------------------------

    async def register_evaluator(self, evaluator: Evaluator, *, recorded_by: str) -> Evaluator:
        def tx(conn: sa.Connection) -> Evaluator:
            row = conn.execute(
                sa.select(gate_tables.gate_evaluators.c.body).where(
                    gate_tables.gate_evaluators.c.name == evaluator.name,
                    gate_tables.gate_evaluators.c.version == evaluator.version,
                )
            ).first()
            if row is not None:
                stored = Evaluator.model_validate(row.body)
                if stored != evaluator:
                    raise ConflictError(
                        f"evaluator {evaluator.name}@{evaluator.version} is registered with other content"
                    )
                return stored
            conn.execute(
                sa.insert(gate_tables.gate_evaluators).values(
                    name=evaluator.name,
                    version=evaluator.version,
                    body=evaluator.model_dump(mode="json"),
                    recorded_by=recorded_by,
                    create_time=time.time(),
                )
            )
            return evaluator

        return await self._db.write(tx)

    async def current_evaluator(self, name: str) -> Evaluator | None:
        query = (
            sa.select(gate_tables.gate_evaluators.c.body)
            .where(gate_tables.gate_evaluators.c.name == name)
            .order_by(gate_tables.gate_evaluators.c.seq.desc())
            .limit(1)
        )
        return await self._db.read(lambda conn: _first_body(conn, query, Evaluator))

    async def list_evaluators(self) -> list[Evaluator]:
        query = sa.select(gate_tables.gate_evaluators.c.body).order_by(gate_tables.gate_evaluators.c.seq)
        return await self._db.read(lambda conn: _bodies(conn, query, Evaluator))

    async def put_protected_case(self, case: ProtectedCase, *, recorded_by: str) -> ProtectedCase:
        tx = _put(
            gate_tables.gate_protected_cases,
            case,
            recorded_by,
            resource_name=case.resource_name,
            case_id=case.case_id,
        )
        return await self._db.write(tx)

    async def remove_protected_case(self, resource_name: str, case_id: str) -> None:
        table = gate_tables.gate_protected_cases

        def tx(conn: sa.Connection) -> None:
            deleted = conn.execute(
                sa.delete(table).where(table.c.resource_name == resource_name, table.c.case_id == case_id)
            ).rowcount
            if deleted == 0:
                raise NotFoundError("protected case", f"{resource_name}/{case_id}")

        await self._db.write(tx)

    async def list_protected_cases(self, resource_name: str) -> list[ProtectedCase]:
        table = gate_tables.gate_protected_cases
        query = (
            sa.select(table.c.body).where(table.c.resource_name == resource_name).order_by(table.c.case_id)
        )
        return await self._db.read(lambda conn: _bodies(conn, query, ProtectedCase))

    async def put_policy(self, policy: GatePolicy, *, recorded_by: str) -> GatePolicy:
        tx = _put(gate_tables.gate_policies, policy, recorded_by, resource_name=policy.resource_name)
        return await self._db.write(tx)

    async def get_policy(self, resource_name: str) -> GatePolicy | None:
        table = gate_tables.gate_policies
        query = sa.select(table.c.body).where(table.c.resource_name == resource_name)
        return await self._db.read(lambda conn: _first_body(conn, query, GatePolicy))
