"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29 15:16:46.094503
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "pointer_history",
        sa.Column(
            "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("pointer", sa.String(length=16), nullable=False),
        sa.Column("version_id", sa.String(length=64), nullable=False),
        sa.Column("previous_version_id", sa.String(length=64), nullable=True),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("time", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_pointer_history")),
    )
    with op.batch_alter_table("pointer_history", schema=None) as batch_op:
        batch_op.create_index("ix_pointer_history_name", ["name", "seq"], unique=False)

    op.create_table(
        "resource_sets",
        sa.Column(
            "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("resources_id", sa.String(length=64), nullable=False),
        sa.Column(
            "versions",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("create_time", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_resource_sets")),
        sa.UniqueConstraint("resources_id", name=op.f("uq_resource_sets_resources_id")),
    )
    op.create_table(
        "resource_versions",
        sa.Column(
            "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("version_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column(
            "resource",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("parent_id", sa.String(length=64), nullable=True),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("artifact", sa.Text(), nullable=True),
        sa.Column(
            "metadata",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("create_time", sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_resource_versions")),
        sa.UniqueConstraint("version_id", name=op.f("uq_resource_versions_version_id")),
    )
    with op.batch_alter_table("resource_versions", schema=None) as batch_op:
        batch_op.create_index("ix_resource_versions_name", ["name", "seq"], unique=False)

    op.create_table(
        "rollouts",
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column(
            "input",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("resources_id", sa.String(length=64), nullable=True),
        sa.Column(
            "config",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column(
            "metadata",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("group_id", sa.String(length=200), nullable=True),
        sa.Column("enqueue_time", sa.Float(precision=53), nullable=False),
        sa.Column("start_time", sa.Float(precision=53), nullable=True),
        sa.Column("end_time", sa.Float(precision=53), nullable=True),
        sa.Column("num_attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("current_attempt_id", sa.String(length=64), nullable=True),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("queue_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("rollout_id", name=op.f("pk_rollouts")),
    )
    with op.batch_alter_table("rollouts", schema=None) as batch_op:
        batch_op.create_index("ix_rollouts_enqueue_time", ["enqueue_time"], unique=False)
        batch_op.create_index("ix_rollouts_group", ["group_id"], unique=False)
        batch_op.create_index("ix_rollouts_queue_seq", ["queue_seq"], unique=False)
        batch_op.create_index("ix_rollouts_status_queue", ["status", "queue_seq"], unique=False)

    op.create_table(
        "workers",
        sa.Column("worker_id", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("last_heartbeat_time", sa.Float(precision=53), nullable=True),
        sa.Column("current_rollout_id", sa.String(length=200), nullable=True),
        sa.Column("current_attempt_id", sa.String(length=64), nullable=True),
        sa.Column(
            "metadata",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("worker_id", name=op.f("pk_workers")),
    )
    op.create_table(
        "attempts",
        sa.Column("attempt_id", sa.String(length=64), nullable=False),
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("sequence_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("worker_id", sa.String(length=200), nullable=True),
        sa.Column("start_time", sa.Float(precision=53), nullable=False),
        sa.Column("end_time", sa.Float(precision=53), nullable=True),
        sa.Column("last_heartbeat_time", sa.Float(precision=53), nullable=True),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column(
            "metadata",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["rollout_id"], ["rollouts.rollout_id"], name=op.f("fk_attempts_rollout_id_rollouts")
        ),
        sa.PrimaryKeyConstraint("attempt_id", name=op.f("pk_attempts")),
        sa.UniqueConstraint("rollout_id", "sequence_id", name="uq_attempts_rollout_sequence"),
    )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.create_index("ix_attempts_status", ["status"], unique=False)

    op.create_table(
        "resource_pointers",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("pointer", sa.String(length=16), nullable=False),
        sa.Column("version_id", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["resource_versions.version_id"],
            name=op.f("fk_resource_pointers_version_id_resource_versions"),
        ),
        sa.PrimaryKeyConstraint("name", "pointer", name=op.f("pk_resource_pointers")),
    )
    op.create_table(
        "rewards",
        sa.Column(
            "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("reward_id", sa.String(length=200), nullable=False),
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("attempt_id", sa.String(length=64), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Float(precision=53), nullable=False),
        sa.Column("span_id", sa.String(length=64), nullable=True),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("primary", sa.Boolean(), nullable=False),
        sa.Column("create_time", sa.Float(precision=53), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"], ["attempts.attempt_id"], name=op.f("fk_rewards_attempt_id_attempts")
        ),
        sa.ForeignKeyConstraint(
            ["rollout_id"], ["rollouts.rollout_id"], name=op.f("fk_rewards_rollout_id_rollouts")
        ),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_rewards")),
        sa.UniqueConstraint("reward_id", name=op.f("uq_rewards_reward_id")),
    )
    with op.batch_alter_table("rewards", schema=None) as batch_op:
        batch_op.create_index("ix_rewards_rollout", ["rollout_id", "seq"], unique=False)

    op.create_table(
        "spans",
        sa.Column(
            "sequence_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("rollout_id", sa.String(length=200), nullable=False),
        sa.Column("attempt_id", sa.String(length=64), nullable=False),
        sa.Column("trace_id", sa.String(length=64), nullable=False),
        sa.Column("span_id", sa.String(length=64), nullable=False),
        sa.Column("parent_id", sa.String(length=64), nullable=True),
        sa.Column("name", sa.String(length=500), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("start_time", sa.Float(precision=53), nullable=True),
        sa.Column("end_time", sa.Float(precision=53), nullable=True),
        sa.Column(
            "attributes",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "events",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "status",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "resource",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["attempt_id"], ["attempts.attempt_id"], name=op.f("fk_spans_attempt_id_attempts")
        ),
        sa.ForeignKeyConstraint(
            ["rollout_id"], ["rollouts.rollout_id"], name=op.f("fk_spans_rollout_id_rollouts")
        ),
        sa.PrimaryKeyConstraint("sequence_id", name=op.f("pk_spans")),
        sa.UniqueConstraint("attempt_id", "span_id", name="uq_spans_attempt_span"),
    )
    with op.batch_alter_table("spans", schema=None) as batch_op:
        batch_op.create_index("ix_spans_rollout_seq", ["rollout_id", "sequence_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("spans", schema=None) as batch_op:
        batch_op.drop_index("ix_spans_rollout_seq")

    op.drop_table("spans")
    with op.batch_alter_table("rewards", schema=None) as batch_op:
        batch_op.drop_index("ix_rewards_rollout")

    op.drop_table("rewards")
    op.drop_table("resource_pointers")
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_attempts_status")

    op.drop_table("attempts")
    op.drop_table("workers")
    with op.batch_alter_table("rollouts", schema=None) as batch_op:
        batch_op.drop_index("ix_rollouts_status_queue")
        batch_op.drop_index("ix_rollouts_queue_seq")
        batch_op.drop_index("ix_rollouts_group")
        batch_op.drop_index("ix_rollouts_enqueue_time")

    op.drop_table("rollouts")
    with op.batch_alter_table("resource_versions", schema=None) as batch_op:
        batch_op.drop_index("ix_resource_versions_name")

    op.drop_table("resource_versions")
    op.drop_table("resource_sets")
    with op.batch_alter_table("pointer_history", schema=None) as batch_op:
        batch_op.drop_index("ix_pointer_history_name")

    op.drop_table("pointer_history")
