"""The store's table metadata, defined once; Alembic revisions are generated from it.

The gate's tables (lightningstore.gate.tables) join this metadata when their module is imported;
migrations/env.py imports both, so Alembic sees the whole schema.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

JsonType = sa.JSON().with_variant(JSONB(), "postgresql")
Time = sa.Float(precision=53)


def seq_column(name: str = "seq") -> sa.Column:
    """An auto-increment integer primary key: the order rows were added in."""
    return sa.Column(
        name, sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True
    )


rollouts = sa.Table(
    "rollouts",
    metadata,
    sa.Column("rollout_id", sa.String(200), primary_key=True),
    sa.Column("input", JsonType, nullable=True),
    sa.Column("mode", sa.String(16), nullable=False),
    sa.Column("resources_id", sa.String(64), nullable=True),
    sa.Column("config", JsonType, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("metadata", JsonType, nullable=False),
    sa.Column("group_id", sa.String(200), nullable=True),
    sa.Column("enqueue_time", Time, nullable=False),
    sa.Column("start_time", Time, nullable=True),
    sa.Column("end_time", Time, nullable=True),
    sa.Column("num_attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("current_attempt_id", sa.String(64), nullable=True),
    sa.Column("failure_reason", sa.Text, nullable=True),
    # Monotonic queue position: a requeued rollout keeps its place (oldest first).
    sa.Column("queue_seq", sa.BigInteger, nullable=False),
)
sa.Index("ix_rollouts_status_queue", rollouts.c.status, rollouts.c.queue_seq)
sa.Index("ix_rollouts_group", rollouts.c.group_id)
sa.Index("ix_rollouts_enqueue_time", rollouts.c.enqueue_time)
sa.Index("ix_rollouts_queue_seq", rollouts.c.queue_seq)

attempts = sa.Table(
    "attempts",
    metadata,
    sa.Column("attempt_id", sa.String(64), primary_key=True),
    sa.Column("rollout_id", sa.String(200), sa.ForeignKey("rollouts.rollout_id"), nullable=False),
    sa.Column("sequence_id", sa.Integer, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("worker_id", sa.String(200), nullable=True),
    sa.Column("start_time", Time, nullable=False),
    sa.Column("end_time", Time, nullable=True),
    sa.Column("last_heartbeat_time", Time, nullable=True),
    sa.Column("failure_reason", sa.Text, nullable=True),
    sa.Column("metadata", JsonType, nullable=False),
    sa.UniqueConstraint("rollout_id", "sequence_id", name="uq_attempts_rollout_sequence"),
)
sa.Index("ix_attempts_status", attempts.c.status)

spans = sa.Table(
    "spans",
    metadata,
    # Store-issued, strictly increasing: the order of arrival across the whole store.
    seq_column("sequence_id"),
    sa.Column("rollout_id", sa.String(200), sa.ForeignKey("rollouts.rollout_id"), nullable=False),
    sa.Column("attempt_id", sa.String(64), sa.ForeignKey("attempts.attempt_id"), nullable=False),
    sa.Column("trace_id", sa.String(64), nullable=False),
    sa.Column("span_id", sa.String(64), nullable=False),
    sa.Column("parent_id", sa.String(64), nullable=True),
    sa.Column("name", sa.String(500), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("start_time", Time, nullable=True),
    sa.Column("end_time", Time, nullable=True),
    sa.Column("attributes", JsonType, nullable=False),
    sa.Column("events", JsonType, nullable=False),
    sa.Column("status", JsonType, nullable=False),
    sa.Column("resource", JsonType, nullable=False),
    sa.UniqueConstraint("attempt_id", "span_id", name="uq_spans_attempt_span"),
)
sa.Index("ix_spans_rollout_seq", spans.c.rollout_id, spans.c.sequence_id)

rewards = sa.Table(
    "rewards",
    metadata,
    seq_column(),
    sa.Column("reward_id", sa.String(200), nullable=False, unique=True),
    sa.Column("rollout_id", sa.String(200), sa.ForeignKey("rollouts.rollout_id"), nullable=False),
    sa.Column("attempt_id", sa.String(64), sa.ForeignKey("attempts.attempt_id"), nullable=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("value", sa.Float(precision=53), nullable=False),
    sa.Column("span_id", sa.String(64), nullable=True),
    sa.Column("step", sa.Integer, nullable=True),
    sa.Column("primary", sa.Boolean, nullable=False),
    sa.Column("create_time", Time, nullable=False),
)
sa.Index("ix_rewards_rollout", rewards.c.rollout_id, rewards.c.seq)

resource_versions = sa.Table(
    "resource_versions",
    metadata,
    seq_column(),
    sa.Column("version_id", sa.String(64), nullable=False, unique=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("resource", JsonType, nullable=False),
    sa.Column("parent_id", sa.String(64), nullable=True),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("artifact", sa.Text, nullable=True),
    sa.Column("metadata", JsonType, nullable=False),
    sa.Column("create_time", Time, nullable=False),
)
sa.Index("ix_resource_versions_name", resource_versions.c.name, resource_versions.c.seq)

resource_sets = sa.Table(
    "resource_sets",
    metadata,
    seq_column(),
    sa.Column("resources_id", sa.String(64), nullable=False, unique=True),
    sa.Column("versions", JsonType, nullable=False),
    sa.Column("create_time", Time, nullable=False),
)

resource_pointers = sa.Table(
    "resource_pointers",
    metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("pointer", sa.String(16), primary_key=True),
    sa.Column("version_id", sa.String(64), sa.ForeignKey("resource_versions.version_id"), nullable=False),
)

pointer_history = sa.Table(
    "pointer_history",
    metadata,
    seq_column(),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("pointer", sa.String(16), nullable=False),
    sa.Column("version_id", sa.String(64), nullable=False),
    sa.Column("previous_version_id", sa.String(64), nullable=True),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("time", Time, nullable=False),
)
sa.Index("ix_pointer_history_name", pointer_history.c.name, pointer_history.c.seq)

workers = sa.Table(
    "workers",
    metadata,
    sa.Column("worker_id", sa.String(200), primary_key=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("last_heartbeat_time", Time, nullable=True),
    sa.Column("current_rollout_id", sa.String(200), nullable=True),
    sa.Column("current_attempt_id", sa.String(64), nullable=True),
    sa.Column("metadata", JsonType, nullable=False),
)
