"""Alembic environment: the target is the store's one metadata, with the gate's tables on it.

Run by `lightningstore.sql.migrate` (which hands over a locked connection) or by the alembic
command (`alembic -c migrations/alembic.ini upgrade head`), which connects to the URL given as
`-x url=...`, else the config's sqlalchemy.url, else $LIGHTNINGRL_DB, else lightningrl.db.
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import context

import lightningstore.gate.tables  # noqa: F401  (the gate's tables join the store's metadata)
from lightningstore.sql.engine import create_engine, normalize_url
from lightningstore.sql.migrate import migration_transaction
from lightningstore.sql.tables import metadata

config = context.config


def _url() -> str:
    given = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    return given or os.environ.get("LIGHTNINGRL_DB") or "lightningrl.db"


def _configure(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def _migrate(connection: sa.Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _migrate(connection)
        return
    engine = create_engine(_url())
    try:
        with migration_transaction(engine) as conn:
            _migrate(conn)
    finally:
        engine.dispose()


def run_migrations_offline() -> None:
    context.configure(url=normalize_url(_url()), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
