"""release gate records

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 15:58:33
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gate_evaluators",
        sa.Column(
            "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("version", sa.String(length=200), nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("recorded_by", sa.String(length=200), nullable=False),
        sa.Column("create_time", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_gate_evaluators")),
        sa.UniqueConstraint("name", "version", name="uq_gate_evaluators_name_version"),
    )
    op.create_table(
        "gate_policies",
        sa.Column("resource_name", sa.String(length=200), nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("recorded_by", sa.String(length=200), nullable=False),
        sa.Column("update_time", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("resource_name", name=op.f("pk_gate_policies")),
    )
    op.create_table(
        "gate_protected_cases",
        sa.Column("resource_name", sa.String(length=200), nullable=False),
        sa.Column("case_id", sa.String(length=200), nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("recorded_by", sa.String(length=200), nullable=False),
        sa.Column("update_time", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("resource_name", "case_id", name=op.f("pk_gate_protected_cases")),
    )
    op.create_table(
        "gate_receipts",
        sa.Column("receipt_id", sa.String(length=64), nullable=False),
        sa.Column("resource_name", sa.String(length=200), nullable=False),
        sa.Column("candidate_version_id", sa.String(length=64), nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("create_time", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("receipt_id", name=op.f("pk_gate_receipts")),
    )
    with op.batch_alter_table("gate_receipts", schema=None) as batch_op:
        batch_op.create_index("ix_gate_receipts_candidate", ["candidate_version_id"], unique=False)

    op.create_table(
        "gate_evidence",
        sa.Column(
            "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("evidence_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("receipt_id", sa.String(length=64), nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("recorded_by", sa.String(length=200), nullable=False),
        sa.Column("create_time", sa.Float(precision=53), nullable=False),
        sa.ForeignKeyConstraint(
            ["receipt_id"],
            ["gate_receipts.receipt_id"],
            name=op.f("fk_gate_evidence_receipt_id_gate_receipts"),
        ),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_gate_evidence")),
        sa.UniqueConstraint("evidence_id", name=op.f("uq_gate_evidence_evidence_id")),
    )
    with op.batch_alter_table("gate_evidence", schema=None) as batch_op:
        batch_op.create_index("ix_gate_evidence_receipt", ["receipt_id", "seq"], unique=False)

    op.create_table(
        "gate_reports",
        sa.Column(
            "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("report_id", sa.String(length=64), nullable=False),
        sa.Column("receipt_id", sa.String(length=64), nullable=False),
        sa.Column("verdict", sa.String(length=32), nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("recorded_by", sa.String(length=200), nullable=False),
        sa.Column("create_time", sa.Float(precision=53), nullable=False),
        sa.ForeignKeyConstraint(
            ["receipt_id"],
            ["gate_receipts.receipt_id"],
            name=op.f("fk_gate_reports_receipt_id_gate_receipts"),
        ),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_gate_reports")),
        sa.UniqueConstraint("report_id", name=op.f("uq_gate_reports_report_id")),
    )
    with op.batch_alter_table("gate_reports", schema=None) as batch_op:
        batch_op.create_index("ix_gate_reports_receipt", ["receipt_id", "seq"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("gate_reports", schema=None) as batch_op:
        batch_op.drop_index("ix_gate_reports_receipt")

    op.drop_table("gate_reports")
    with op.batch_alter_table("gate_evidence", schema=None) as batch_op:
        batch_op.drop_index("ix_gate_evidence_receipt")

    op.drop_table("gate_evidence")
    with op.batch_alter_table("gate_receipts", schema=None) as batch_op:
        batch_op.drop_index("ix_gate_receipts_candidate")

    op.drop_table("gate_receipts")
    op.drop_table("gate_protected_cases")
    op.drop_table("gate_policies")
    op.drop_table("gate_evaluators")
