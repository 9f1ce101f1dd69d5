"""Migrations: upgrade/downgrade round trip, and the migrated schema equals the table metadata."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from backends import create_pg_database, drop_pg_database
from setuptools import find_packages

import lightningstore.gate.tables  # noqa: F401  (the gate's tables join the metadata, as in migrations/env.py)
from lightningstore import SqlStore
from lightningstore.sql import migrate
from lightningstore.sql.tables import metadata

ROOT = Path(__file__).resolve().parents[2]


def _sync_engine(url: str) -> sa.Engine:
    return sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))


def _diff(url: str) -> list:
    engine = _sync_engine(url)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(ctx, metadata)
    engine.dispose()
    return diff


def _tables(url: str) -> set[str]:
    engine = _sync_engine(url)
    names = set(sa.inspect(engine).get_table_names())
    engine.dispose()
    return names


def test_upgrade_downgrade_upgrade_matches_metadata(db_url: str) -> None:
    migrate.upgrade(db_url)
    assert migrate.current_revision(db_url) is not None
    assert _diff(db_url) == []
    migrate.downgrade(db_url, "base")
    assert migrate.current_revision(db_url) is None
    assert _tables(db_url) <= {"alembic_version"}
    migrate.upgrade(db_url)
    assert _diff(db_url) == []
    assert set(metadata.tables) <= _tables(db_url)


def _span_compression(url: str) -> dict[str, str]:
    engine = _sync_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT attname, attcompression FROM pg_attribute "
                "WHERE attrelid = 'spans'::regclass AND attname IN ('attributes', 'events', 'resource')"
            )
        )
        found = {name: str(method) for name, method in rows}
    engine.dispose()
    return found


def test_span_json_is_lz4_compressed_on_postgresql_and_back_after_downgrade(pg_server) -> None:
    server = pg_server()
    url = create_pg_database(server)
    try:
        migrate.upgrade(url)
        assert _span_compression(url) == {"attributes": "l", "events": "l", "resource": "l"}
        migrate.downgrade(url, "0003_plans")
        assert _span_compression(url) == {"attributes": "p", "events": "p", "resource": "p"}
    finally:
        drop_pg_database(server, url)


def test_cli_upgrade(db_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lightningrl.cli", "db", "upgrade", "--url", db_url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "0004_span_lz4" in out  # the head revision (0004_span_lz4: lz4 for span JSON on PostgreSQL)
    assert _diff(db_url) == []


async def test_opening_a_store_on_an_empty_database_upgrades_it(db_url: str) -> None:
    store = SqlStore(db_url)
    await store.enqueue_rollout(1)
    await store.close()
    assert migrate.current_revision(db_url) is not None
    assert _diff(db_url) == []


def test_alembic_command_from_a_checkout(tmp_path: Path) -> None:
    alembic = shutil.which(
        "alembic", path=os.pathsep.join([str(Path(sys.executable).parent), str(ROOT / ".venv/bin")])
    )
    assert alembic is not None, "the alembic command is not installed"
    # Without PYTHONPATH: migrations/alembic.ini itself puts the checkout's src/ first.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LIGHTNINGRL_DB")}
    db = tmp_path / "cli.db"
    command = [alembic, "-c", "migrations/alembic.ini"]
    subprocess.run([*command, "-x", f"url={db}", "upgrade", "head"], cwd=ROOT, env=env, check=True)
    tables = _tables(f"sqlite:///{db}")
    assert {"rollouts", "spans", "gate_receipts", "gate_policies"} <= tables
    assert set(metadata.tables) <= tables
    current = subprocess.run(
        [*command, "current"],
        cwd=ROOT,
        env={**env, "LIGHTNINGRL_DB": str(db)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "0004_span_lz4 (head)" in current


def test_the_wheel_lists_every_package_and_ships_the_migrations() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"": "src", "lightningstore.migrations": "migrations"}
    migrations = {"lightningstore.migrations", "lightningstore.migrations.versions"}
    assert sorted(setuptools["packages"]) == sorted([*find_packages("src"), *migrations])
    assert (ROOT / "migrations/__init__.py").is_file() and (
        ROOT / "migrations/versions/__init__.py"
    ).is_file()
