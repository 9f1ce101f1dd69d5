"""Schema migrations: run Alembic (the environment in the top-level migrations/) from code."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from lightningstore.sql.engine import WRITE_OPTION, create_engine

_PG_MIGRATION_LOCK = 7_402_115_001


def migrations_dir() -> Path:
    """The Alembic environment: a source checkout's top-level migrations/, else the
    `lightningstore.migrations` package that an install (wheel or editable) provides."""
    # The checkout first: with PYTHONPATH=src, an installed copy may belong to another tree.
    checkout = Path(__file__).resolve().parents[3] / "migrations"
    if (checkout / "env.py").is_file():
        return checkout
    spec = importlib.util.find_spec("lightningstore.migrations")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"no Alembic environment: neither {checkout} nor lightningstore.migrations exists")
    return Path(next(iter(spec.submodule_search_locations)))


def alembic_config(url: str | None = None) -> Config:
    """An Alembic Config pointing at our migrations (and at `url` when given)."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


@contextmanager
def migration_transaction(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A write transaction holding the migration lock: two processes opening the same empty
    database must not both create the tables."""
    with engine.connect() as conn:
        conn = conn.execution_options(**{WRITE_OPTION: True})
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
            yield conn


def _run(engine: sa.Engine, action: str, revision: str) -> None:
    with migration_transaction(engine) as conn:
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
