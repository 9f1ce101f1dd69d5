"""SqlGateRecords: GateRecords in the SqlStore's database, through the store's own transactions."""

from __future__ import annotations

import time
import uuid

import sqlalchemy as sa
from pydantic import TypeAdapter

from lightningstore.errors import ConflictError, NotFoundError
from lightningstore.gate import tables as gate_tables
from lightningstore.gate.evaluator import Evaluator
from lightningstore.gate.evidence import Evidence, EvidenceKind, EvidenceRecord
from lightningstore.gate.plan import PlanBody, TrainingPlan, plan_id_of
from lightningstore.gate.policy import GatePolicy
from lightningstore.gate.protected import ProtectedCase
from lightningstore.gate.receipt import ReceiptBody, UpdateReceipt, receipt_id_of
from lightningstore.gate.records import GateRecords
from lightningstore.gate.verdict import GateReport
from lightningstore.sql.database import SqlDatabase

_evidence = TypeAdapter(Evidence)


class SqlGateRecords(GateRecords):
    """Gate records in the store's database. `SqlGateRecords(sql_store.database)`."""

    def __init__(self, database: SqlDatabase) -> None:
        # The store's own transactions: on SQLite, gate writes queue with the store's writes on
        # its one writer thread instead of competing with it for the database lock.
        self._db = database

    @staticmethod
    def _require_receipt(conn: sa.Connection, receipt_id: str) -> None:
        found = conn.execute(
            sa.select(gate_tables.gate_receipts.c.receipt_id).where(
                gate_tables.gate_receipts.c.receipt_id == receipt_id
            )
        ).first()
        if found is None:
            raise NotFoundError("receipt", receipt_id)

    # ---- receipts ------------------------------------------------------------------------------

    async def add_receipt(self, body: ReceiptBody, *, created_by: str) -> UpdateReceipt:
        body = ReceiptBody.model_validate(body.model_dump())
        receipt = UpdateReceipt(
            **body.model_dump(),
            receipt_id=receipt_id_of(body),
            created_by=created_by,
            create_time=time.time(),
        )

        def tx(conn: sa.Connection) -> UpdateReceipt:
            row = conn.execute(
                sa.select(gate_tables.gate_receipts.c.body).where(
                    gate_tables.gate_receipts.c.receipt_id == receipt.receipt_id
                )
            ).first()
            if row is not None:
                return UpdateReceipt.model_validate(row.body)
            conn.execute(
                sa.insert(gate_tables.gate_receipts).values(
                    receipt_id=receipt.receipt_id,
                    resource_name=receipt.resource_name,
                    candidate_version_id=receipt.candidate_version_id,
                    body=receipt.model_dump(mode="json"),
                    created_by=created_by,
                    create_time=receipt.create_time,
                )
            )
            return receipt

        return await self._db.write(tx)

    async def get_receipt(self, receipt_id: str) -> UpdateReceipt | None:
        def tx(conn: sa.Connection) -> UpdateReceipt | None:
            row = conn.execute(
                sa.select(gate_tables.gate_receipts.c.body).where(
                    gate_tables.gate_receipts.c.receipt_id == receipt_id
                )
            ).first()
            return UpdateReceipt.model_validate(row.body) if row is not None else None

        return await self._db.read(tx)

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
        return await self._db.read(
            lambda conn: [UpdateReceipt.model_validate(r.body) for r in conn.execute(query)]
        )

    # ---- training plans ----------------------------------------------------------------------------

    async def add_plan(self, body: PlanBody, *, created_by: str) -> TrainingPlan:
        body = PlanBody.model_validate(body.model_dump())
        plan = TrainingPlan(
            **body.model_dump(), plan_id=plan_id_of(body), created_by=created_by, create_time=time.time()
        )

        def tx(conn: sa.Connection) -> TrainingPlan:
            row = conn.execute(
                sa.select(gate_tables.gate_plans.c.body).where(
                    gate_tables.gate_plans.c.plan_id == plan.plan_id
                )
            ).first()
            if row is not None:
                return TrainingPlan.model_validate(row.body)
            conn.execute(
                sa.insert(gate_tables.gate_plans).values(
                    plan_id=plan.plan_id,
                    resource_name=plan.resource_name,
                    body=plan.model_dump(mode="json"),
                    created_by=created_by,
                    create_time=plan.create_time,
                )
            )
            return plan

        return await self._db.write(tx)

    async def get_plan(self, plan_id: str) -> TrainingPlan | None:
        def tx(conn: sa.Connection) -> TrainingPlan | None:
            row = conn.execute(
                sa.select(gate_tables.gate_plans.c.body).where(gate_tables.gate_plans.c.plan_id == plan_id)
            ).first()
            return TrainingPlan.model_validate(row.body) if row is not None else None

        return await self._db.read(tx)

    # ---- reports and evidence ----------------------------------------------------------------------

    async def add_report(self, report: GateReport) -> GateReport:
        report = report.model_copy(update={"create_time": report.create_time or time.time()})

        def tx(conn: sa.Connection) -> GateReport:
            self._require_receipt(conn, report.receipt_id)
            conn.execute(
                sa.insert(gate_tables.gate_reports).values(
                    report_id=report.report_id,
                    receipt_id=report.receipt_id,
                    verdict=report.verdict.value,
                    body=report.model_dump(mode="json"),
                    recorded_by=report.recorded_by,
                    create_time=report.create_time,
                )
            )
            return report

        return await self._db.write(tx)

    async def list_reports(self, receipt_id: str) -> list[GateReport]:
        query = (
            sa.select(gate_tables.gate_reports.c.body)
            .where(gate_tables.gate_reports.c.receipt_id == receipt_id)
            .order_by(gate_tables.gate_reports.c.seq)
        )
        return await self._db.read(
            lambda conn: [GateReport.model_validate(r.body) for r in conn.execute(query)]
        )

    async def add_evidence(self, body: Evidence, *, recorded_by: str) -> EvidenceRecord:
        record = EvidenceRecord(
            evidence_id=f"ev-{uuid.uuid4().hex[:16]}",
            kind=EvidenceKind(body.kind),
            receipt_id=body.receipt_id,
            body=_evidence.validate_python(body.model_dump()),
            recorded_by=recorded_by,
            create_time=time.time(),
        )

        def tx(conn: sa.Connection) -> EvidenceRecord:
            self._require_receipt(conn, record.receipt_id)
            conn.execute(
                sa.insert(gate_tables.gate_evidence).values(
                    evidence_id=record.evidence_id,
                    kind=record.kind.value,
                    receipt_id=record.receipt_id,
                    body=record.model_dump(mode="json"),
                    recorded_by=recorded_by,
                    create_time=record.create_time,
                )
            )
            return record

        return await self._db.write(tx)

    async def list_evidence(self, receipt_id: str, kind: EvidenceKind | None = None) -> list[EvidenceRecord]:
        query = (
            sa.select(gate_tables.gate_evidence.c.body)
            .where(gate_tables.gate_evidence.c.receipt_id == receipt_id)
            .order_by(gate_tables.gate_evidence.c.seq)
        )
        if kind is not None:
            query = query.where(gate_tables.gate_evidence.c.kind == EvidenceKind(kind).value)
        return await self._db.read(
            lambda conn: [EvidenceRecord.model_validate(r.body) for r in conn.execute(query)]
        )

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

        def tx(conn: sa.Connection) -> Evaluator | None:
            row = conn.execute(query).first()
            return Evaluator.model_validate(row.body) if row is not None else None

        return await self._db.read(tx)

    async def list_evaluators(self) -> list[Evaluator]:
        query = sa.select(gate_tables.gate_evaluators.c.body).order_by(gate_tables.gate_evaluators.c.seq)
        return await self._db.read(
            lambda conn: [Evaluator.model_validate(r.body) for r in conn.execute(query)]
        )

    async def put_protected_case(self, case: ProtectedCase, *, recorded_by: str) -> ProtectedCase:
        table = gate_tables.gate_protected_cases
        key = (table.c.resource_name == case.resource_name) & (table.c.case_id == case.case_id)
        values = {
            "body": case.model_dump(mode="json"),
            "recorded_by": recorded_by,
            "update_time": time.time(),
        }

        def tx(conn: sa.Connection) -> ProtectedCase:
            if conn.execute(sa.update(table).where(key).values(**values)).rowcount == 0:
                conn.execute(
                    sa.insert(table).values(resource_name=case.resource_name, case_id=case.case_id, **values)
                )
            return case

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
        return await self._db.read(
            lambda conn: [ProtectedCase.model_validate(r.body) for r in conn.execute(query)]
        )

    async def put_policy(self, policy: GatePolicy, *, recorded_by: str) -> GatePolicy:
        table = gate_tables.gate_policies
        values = {
            "body": policy.model_dump(mode="json"),
            "recorded_by": recorded_by,
            "update_time": time.time(),
        }

        def tx(conn: sa.Connection) -> GatePolicy:
            key = table.c.resource_name == policy.resource_name
            if conn.execute(sa.update(table).where(key).values(**values)).rowcount == 0:
                conn.execute(sa.insert(table).values(resource_name=policy.resource_name, **values))
            return policy

        return await self._db.write(tx)

    async def get_policy(self, resource_name: str) -> GatePolicy | None:
        table = gate_tables.gate_policies

        def tx(conn: sa.Connection) -> GatePolicy | None:
            row = conn.execute(sa.select(table.c.body).where(table.c.resource_name == resource_name)).first()
            return GatePolicy.model_validate(row.body) if row is not None else None

        return await self._db.read(tx)
