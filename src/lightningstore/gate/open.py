"""`gate_records(store)`: the GateRecords that live beside a store (same database or same server)."""

from __future__ import annotations

from lightningstore.gate.records import GateRecords
from lightningstore.store import LightningStore


def gate_records(store: LightningStore) -> GateRecords:
    """SqlGateRecords for a SqlStore, HttpGateRecords for a StoreClient."""
    from lightningstore.client.store_client import StoreClient
    from lightningstore.sql import SqlStore

    if isinstance(store, SqlStore):
        from lightningstore.gate.sql_records import SqlGateRecords

        return SqlGateRecords(store.database)
    if isinstance(store, StoreClient):
        from lightningstore.gate.http_records import HttpGateRecords

        return HttpGateRecords(store)
    raise TypeError(f"no gate records for a {type(store).__name__}; use a SqlStore or a StoreClient")
