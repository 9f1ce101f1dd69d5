"""gate training plans (the receipt's part frozen before training)

Revision ID: 0003_plans
Revises: 0002
Create Date: 2026-11-30 23:55:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003_plans"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gate_plans",
        sa.Column("plan_id", sa.String(length=64), nullable=False),
        sa.Column("resource_name", sa.String(length=200), nullable=False),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("create_time", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("plan_id", name=op.f("pk_gate_plans")),
    )
    with op.batch_alter_table("gate_plans", schema=None) as batch_op:
        batch_op.create_index("ix_gate_plans_resource", ["resource_name"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("gate_plans", schema=None) as batch_op:
        batch_op.drop_index("ix_gate_plans_resource")
    op.drop_table("gate_plans")
