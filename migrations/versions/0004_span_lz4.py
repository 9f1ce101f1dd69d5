"""spans: compress the JSON columns with lz4 on PostgreSQL

PostgreSQL compresses a value over ~2 KB (an LLM-call span's attributes are ~4 KB) with pglz by
default; lz4 costs the server a fraction of that CPU per stored span (bench/README.md, "PostgreSQL's
cost"). Only values written afterwards change; a server built without lz4 (or before PostgreSQL 14)
keeps pglz. SQLite stores JSON as text: nothing to do there.

Revision ID: 0004_span_lz4
Revises: 0003_plans
Create Date: 2026-12-04 18:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_span_lz4"
down_revision: str | None = "0003_plans"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = ("attributes", "events", "resource")


def _has_lz4() -> bool:
    found = op.get_bind().execute(
        sa.text(
            "SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
        )
    )
    return found.first() is not None


def _set_compression(method: str) -> None:
    if op.get_bind().dialect.name != "postgresql" or not _has_lz4():
        return
    for column in _COLUMNS:
        op.execute(f"ALTER TABLE spans ALTER COLUMN {column} SET COMPRESSION {method}")


def upgrade() -> None:
    _set_compression("lz4")


def downgrade() -> None:
    _set_compression("pglz")
