"""SqlStore and its parts: the LightningStore on SQLAlchemy 2 (SQLite file or PostgreSQL)."""

from lightningstore.sql.database import SqlDatabase
from lightningstore.sql.store import SqlStore

__all__ = ["SqlDatabase", "SqlStore"]
