"""Open a store from a CLI argument: an http(s) URL gives a StoreClient, anything else a SqlStore."""

from __future__ import annotations

import os

from lightningstore import LightningStore


def open_store(target: str, token: str | None = None) -> LightningStore:
    if target.startswith(("http://", "https://")):
        from lightningstore.client import StoreClient

        return StoreClient(target, token=token or os.environ.get("LIGHTNINGRL_ADMIN_TOKEN"))
    from lightningstore import SqlStore

    return SqlStore(target)
