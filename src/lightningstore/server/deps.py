"""FastAPI dependency giving routes the app's store."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from lightningstore.store import LightningStore


def current_store(request: Request) -> LightningStore:
    return request.app.state.store


StoreDep = Annotated[LightningStore, Depends(current_store)]
