"""Schema migrations: run Alembic (the environment in lightningstore/migrations) from code."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.ext.asyncio import AsyncEngine

from lightningstore.sql_engine import WRITE_OPTION, create_engine, normalize_url, sync_url

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_PG_MIGRATION_LOCK = 7_402_115_001


def alembic_config(url: str | None = None) -> Config:
    """An Alembic Config pointing at our migrations (and at `url` when given)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def _run(connection: sa.Connection, action: str, revision: str) -> None:
    if connection.dialect.name == "postgresql":
        # Two processes opening the same empty database must not both create the tables.
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
    config = alembic_config()
    config.attributes["connection"] = connection
    getattr(command, action)(config, revision)


async def upgrade_async(engine: AsyncEngine, revision: str = "head") -> None:
    """Upgrade the database behind `engine` (serialised: BEGIN IMMEDIATE / an advisory lock)."""
    async with engine.connect() as conn:
        conn = await conn.execution_options(**{WRITE_OPTION: True})
        async with conn.begin():
            await conn.run_sync(_run, "upgrade", revision)


async def downgrade_async(engine: AsyncEngine, revision: str = "base") -> None:
    async with engine.connect() as conn:
        conn = await conn.execution_options(**{WRITE_OPTION: True})
        async with conn.begin():
            await conn.run_sync(_run, "downgrade", revision)


async def _with_engine(url: str, action: str, revision: str) -> None:
    engine = create_engine(url)
    try:
        await (upgrade_async if action == "upgrade" else downgrade_async)(engine, revision)
    finally:
        await engine.dispose()


def upgrade(url: str, revision: str = "head") -> None:
    import asyncio

    asyncio.run(_with_engine(normalize_url(url), "upgrade", revision))


def downgrade(url: str, revision: str = "base") -> None:
    import asyncio

    asyncio.run(_with_engine(normalize_url(url), "downgrade", revision))


def current_revision(url: str) -> str | None:
    """The revision the database is at (None for an empty database); synchronous."""
    from alembic.runtime.migration import MigrationContext

    engine = sa.create_engine(sync_url(normalize_url(url)))
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
