"""install_proxy: mount the model gateway on the store server's FastAPI app (called by `build_app`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from lightningstore.proxy.config import ProxyConfig
from lightningstore.proxy.gateway import Gateway
from lightningstore.proxy.routes import router
from lightningstore.proxy.upstream import new_client


def install_proxy(app: FastAPI, *, config: ProxyConfig | None = None) -> Gateway:
    """Add the `/proxy` routes to `app` (being built by `build_app`: its `state.store` and tokens are used).

    One keep-alive upstream client serves every call; it is replaced at startup and closed at shutdown.
    """
    config = config or ProxyConfig()
    gateway = Gateway(app.state.store, config, new_client(config))
    app.state.proxy = gateway
    app.include_router(router)
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: Any) -> AsyncIterator[Any]:
        if gateway.upstream.client.is_closed:
            gateway.upstream.client = new_client(config)
        async with inner(application) as state:
            try:
                yield state
            finally:
                await gateway.upstream.aclose()
                await gateway.upstream.client.aclose()

    app.router.lifespan_context = lifespan
    return gateway
