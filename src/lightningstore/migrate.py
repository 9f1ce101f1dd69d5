"""Schema migrations: run Alembic (the environment in lightningstore/migrations) from code."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from lightningstore.sql_engine import WRITE_OPTION, create_engine

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_PG_MIGRATION_LOCK = 7_402_115_001


def alembic_config(url: str | None = None) -> Config:
    """An Alembic Config pointing at our migrations (and at `url` when given)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def _run(engine: sa.Engine, action: str, revision: str) -> None:
    # Serialised: two processes opening the same empty database must not both create the tables.
    with engine.connect() as conn:
        conn = conn.execution_options(**{WRITE_OPTION: True})
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
            config = alembic_config()
            config.attributes["connection"] = conn
            getattr(command, action)(config, revision)


def upgrade_engine(engine: sa.Engine, revision: str = "head") -> None:
    _run(engine, "upgrade", revision)


def _with_url(url: str, action: str, revision: str) -> None:
    engine = create_engine(url)
    try:
        _run(engine, action, revision)
    finally:
        engine.dispose()


def upgrade(url: str, revision: str = "head") -> None:
    """Upgrade the database at `url` (a URL or SQLite path) to `revision`."""
    _with_url(url, "upgrade", revision)


def downgrade(url: str, revision: str = "base") -> None:
    _with_url(url, "downgrade", revision)


def current_revision(url: str) -> str | None:
    """The revision the database is at (None for an empty database)."""
    from alembic.runtime.migration import MigrationContext

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
