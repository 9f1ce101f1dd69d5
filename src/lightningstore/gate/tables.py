"""Gate tables on the store's one metadata (migrations/env.py imports this module for Alembic)."""

from __future__ import annotations

import sqlalchemy as sa

from lightningstore.sql.tables import JsonType, Time, metadata, seq_column


def _record(by: str, at: str) -> tuple[sa.Column, sa.Column, sa.Column]:
    """Every gate row's tail: the record's JSON `body`, who filed it (`by`) and when (`at`)."""
    return (
        sa.Column("body", JsonType, nullable=False),
        sa.Column(by, sa.String(200), nullable=False),
        sa.Column(at, Time, nullable=False),
    )


def _filed(name: str, key: str, *columns: sa.Column) -> sa.Table:
    """A table of content-addressed filed records (gate.receipt.Filed): keyed by their digest id."""
    return sa.Table(
        name,
        metadata,
        sa.Column(key, sa.String(64), primary_key=True),
        sa.Column("resource_name", sa.String(200), nullable=False),
        *columns,
        *_record("created_by", "create_time"),
    )


def _receipt_fk() -> sa.Column:
    return sa.Column("receipt_id", sa.String(64), sa.ForeignKey("gate_receipts.receipt_id"), nullable=False)


gate_receipts = _filed(
    "gate_receipts", "receipt_id", sa.Column("candidate_version_id", sa.String(64), nullable=False)
)
sa.Index("ix_gate_receipts_candidate", gate_receipts.c.candidate_version_id)

gate_plans = _filed("gate_plans", "plan_id")
sa.Index("ix_gate_plans_resource", gate_plans.c.resource_name)

gate_reports = sa.Table(
    "gate_reports",
    metadata,
    seq_column(),
    sa.Column("report_id", sa.String(64), nullable=False, unique=True),
    _receipt_fk(),
    sa.Column("verdict", sa.String(32), nullable=False),
    *_record("recorded_by", "create_time"),
)
sa.Index("ix_gate_reports_receipt", gate_reports.c.receipt_id, gate_reports.c.seq)

gate_evidence = sa.Table(
    "gate_evidence",
    metadata,
    seq_column(),
    sa.Column("evidence_id", sa.String(64), nullable=False, unique=True),
    sa.Column("kind", sa.String(16), nullable=False),
    _receipt_fk(),
    *_record("recorded_by", "create_time"),
)
sa.Index("ix_gate_evidence_receipt", gate_evidence.c.receipt_id, gate_evidence.c.seq)

gate_evaluators = sa.Table(
    "gate_evaluators",
    metadata,
    seq_column(),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("version", sa.String(200), nullable=False),
    *_record("recorded_by", "create_time"),
    sa.UniqueConstraint("name", "version", name="uq_gate_evaluators_name_version"),
)

gate_protected_cases = sa.Table(
    "gate_protected_cases",
    metadata,
    sa.Column("resource_name", sa.String(200), primary_key=True),
    sa.Column("case_id", sa.String(200), primary_key=True),
    *_record("recorded_by", "update_time"),
)

gate_policies = sa.Table(
    "gate_policies",
    metadata,
    sa.Column("resource_name", sa.String(200), primary_key=True),
    *_record("recorded_by", "update_time"),
)
