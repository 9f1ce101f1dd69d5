"""`build_app(store, ...)`: the one FastAPI application of the store server.

It serves the store over JSON REST and OTLP, and mounts the model gateway (`/proxy`) and the release
gate (`/v1/gate`) unless asked not to. `lightningrl store serve`, the local stack and the tests all
assemble the server here, so they serve the same routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from lightningstore.auth.raw_path import RawPathMiddleware
from lightningstore.auth.tokens import TokenConfig
from lightningstore.http_api import ErrorBody
from lightningstore.server.admission import AdmissionMiddleware, admit
from lightningstore.server.api_docs import install_api_docs
from lightningstore.server.attempt_quota import DEFAULT_ATTEMPT_QUOTA, AttemptQuota, QuotaLedger
from lightningstore.server.auth import declare_bearer_security
from lightningstore.server.body_limit import BodyLimitMiddleware
from lightningstore.server.error_handlers import install_error_handlers
from lightningstore.server.fast_path import FastPathMiddleware, early_route, serve_hot
from lightningstore.server.rate_limit import RateLimiter, RateLimitMiddleware
from lightningstore.server.route_table import register_routes
from lightningstore.server.watchdog import run_watchdog
from lightningstore.store import LightningStore

if TYPE_CHECKING:
    from lightningstore.proxy.config import ProxyConfig

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    code: {"model": ErrorBody} for code in (400, 401, 403, 404, 409, 413, 422, 429)
}


class StoreApp(FastAPI):
    """The store's FastAPI app. A hot route that none of its middleware would act on (no rate limit, no
    FastAPI telemetry, no middleware added after `build_app`, a body within the limit) is answered ahead
    of the middleware stack, once `admit`ted, as AdmissionMiddleware and FastPathMiddleware would answer
    it inside: the request skips the CPU that every layer of the stack spends on it."""

    early_middleware: int | None = None
    """How many middleware `build_app` added when the early answer is allowed; None: never."""
    max_body_bytes = DEFAULT_MAX_BODY_BYTES
    telemetry_seen: tuple[float, bool] | None = None
    """When `_telemetry_on` last asked FastAPI, and its answer."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        early = self.early_middleware is not None and len(self.user_middleware) == self.early_middleware
        hit = early_route(scope, self.max_body_bytes) if early else None
        if hit is None or self.root_path or _telemetry_on(self):
            await super().__call__(scope, receive, send)
            return

        async def fallback(_: Scope, receive: Receive, send: Send) -> None:
            await FastAPI.__call__(self, scope, receive, send)

        refused, receive = admit(self.state.tokens, self.state.quota_ledger, scope, receive)
        if refused is not None:  # as AdmissionMiddleware would answer it
            await refused(scope, receive, send)
            return
        # What Starlette and RawPathMiddleware would have set on the way in.
        inner = {**scope, "app": self, "path": scope["raw_path"].decode("latin-1")}
        await serve_hot(*hit, inner, receive, send, fallback)


TELEMETRY_RECHECK_SECONDS = 1.0
"""How long `_telemetry_on`'s answer is reused: asking FastAPI (which asks OpenTelemetry, which reads
the environment) on every request is a visible share of the server's CPU."""


def _telemetry_on(app: StoreApp) -> bool:
    """FastAPI's own telemetry would record this request (unknown: assume it would); a tracer or meter
    provider configured while the server runs is seen within TELEMETRY_RECHECK_SECONDS."""
    native = getattr(app, "_native_telemetry", None)
    if native is None:
        return True
    now = time.monotonic()
    seen = app.telemetry_seen
    if seen is not None and now - seen[0] < TELEMETRY_RECHECK_SECONDS:
        return seen[1]
    on = bool(native.enabled())
    app.telemetry_seen = (now, on)
    return on


def build_app(
    store: LightningStore,
    *,
    tokens: TokenConfig | None = None,
    proxy: bool | ProxyConfig = True,
    gate: bool = True,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    sweep_interval: float | None = 1.0,
    close_store: bool = False,
    rate_limit: float | None = None,
    rate_burst: int | None = None,
    ui: bool = True,
    ui_metrics_csv: str | Path | None = None,
    attempt_quota: AttemptQuota | None = DEFAULT_ATTEMPT_QUOTA,
) -> FastAPI:
    """The store server's HTTP API. No tokens (or an empty TokenConfig) = dev mode: every caller is admin.

    `proxy` mounts the model gateway (True: default ProxyConfig; a ProxyConfig: that one; False: none),
    its Gateway at `app.state.proxy`; `gate` mounts the release gate's records (the store must be a
    SqlStore or a StoreClient), its GateRecords at `app.state.gate`;
    `sweep_interval` seconds between watchdog sweeps (None: no background watchdog);
    `close_store` closes the store when the app shuts down;
    `rate_limit` requests/second per caller (None: unlimited) with bursts of `rate_burst` requests
    (default: one second's worth); over it a caller gets 429 with Retry-After;
    `ui` mounts the dashboard at /ui (`lightningstore.server.ui`), whose training page charts
    `ui_metrics_csv` (a run's metrics.csv) when given;
    `attempt_quota` bounds what each attempt's agent key may send (`server.attempt_quota`; None: no bound).
    Without tokens the app answers only loopback Host names and no write from another site
    (`server.origin_guard`).
    """
    if rate_limit is None and rate_burst is not None:
        raise ValueError(f"rate_burst={rate_burst!r} needs a rate_limit")
    limiter = RateLimiter(rate_limit, rate_burst) if rate_limit is not None else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        ensure_schema = getattr(store, "ensure_schema", None)
        if ensure_schema is not None:
            await ensure_schema()
        watchdog = asyncio.create_task(run_watchdog(store, sweep_interval)) if sweep_interval else None
        try:
            yield
        finally:
            if watchdog is not None:
                watchdog.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watchdog
            if close_store:
                await store.close()

    app = StoreApp(
        title="LightningStore",
        version="1",
        description="Rollouts, attempts, spans, rewards and resources of LightningRL over JSON REST.",
        lifespan=lifespan,
        responses=ERROR_RESPONSES,
        openapi_url=None,  # served by install_api_docs, behind the bearer check
        docs_url=None,
        redoc_url=None,
    )
    app.state.store = store
    app.state.tokens = tokens or TokenConfig()
    app.state.max_body_bytes = max_body_bytes
    app.state.rate_limiter = limiter
    app.state.quota_ledger = QuotaLedger(attempt_quota) if attempt_quota is not None else None
    register_routes(app)  # every store route, in server.route_table's order
    declare_bearer_security(app)
    install_api_docs(app)
    install_error_handlers(app)
    app.add_middleware(FastPathMiddleware)  # innermost: inside the body limit and the raw path
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=max_body_bytes)
    app.add_middleware(RawPathMiddleware)
    # Outside the body limit (which answers a streamed body past the quota), inside the rate limit.
    app.add_middleware(AdmissionMiddleware)
    app.max_body_bytes = max_body_bytes
    if limiter is not None:
        # Outermost: refuse before the body is read or anything is routed.
        app.add_middleware(RateLimitMiddleware, limiter=limiter)
    if proxy:
        from lightningstore.proxy.install import install_proxy

        # The LLM gateway lives in the store server (docs/architecture.md, step 3 of one rollout).
        install_proxy(app, config=None if proxy is True else proxy)
    if gate:
        from lightningstore.gate.routes import install_gate

        install_gate(app)  # the release gate's records (docs/architecture.md, "The release gate")
    if ui:
        from lightningstore.server.ui import install_ui

        install_ui(app, metrics_csv=ui_metrics_csv)
    if limiter is None:
        app.early_middleware = len(app.user_middleware)
    return app
