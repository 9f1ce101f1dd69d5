"""The dashboard at /ui: rollouts, one rollout's span waterfall, training charts, resources, release receipts.

Server-rendered Jinja2 pages with one small script; the charts are uPlot, vendored in `static/` (see
static/VENDORED.md), so nothing is built or fetched at run time. `build_app` mounts it with `install_ui`.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

from lightningstore.server.ui.access import PageError, PageRefused, TokenInUrl, token_in_url_response
from lightningstore.server.ui.metrics import MetricsCache
from lightningstore.server.ui.routes import router
from lightningstore.server.ui.templating import HERE, render


def install_ui(app: FastAPI, *, metrics_csv: str | Path | None = None) -> None:
    """Mount the dashboard's pages under /ui and its assets under /ui/static.

    `metrics_csv`: the training run's metrics.csv the training page charts (else the metrics stored with
    each published version)."""
    app.state.ui_metrics_csv = Path(metrics_csv) if metrics_csv is not None else None
    app.state.ui_metrics_cache = MetricsCache()
    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, PageRefused)
        if exc.status == 401:
            return render(request, "login.html", status=401, next_url=exc.next_url, message=exc.message)
        return render(request, "error.html", status=exc.status, message=exc.message, caller=None)

    async def failed(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, PageError)
        return render(request, "error.html", status=exc.status, message=exc.message, caller=None)

    async def token_in_url(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, TokenInUrl)
        return token_in_url_response(request, exc)

    app.add_exception_handler(PageRefused, refused)
    app.add_exception_handler(PageError, failed)
    app.add_exception_handler(TokenInUrl, token_in_url)


__all__ = ["install_ui"]
