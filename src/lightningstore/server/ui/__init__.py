"""The dashboard at /ui: rollouts, one rollout's span waterfall, training charts, resources, release receipts.

Server-rendered Jinja2 pages with one small script; the charts are uPlot, vendored in `static/` (see
static/VENDORED.md), so nothing is built or fetched at run time. `build_app` mounts it with `install_ui`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

from lightningstore.server.ui.access import PageError, PageRefused
from lightningstore.server.ui.metrics import MetricsCache
from lightningstore.server.ui.routes import router
from lightningstore.server.ui.templating import ASSET_HEADERS, HERE, render


class DashboardFiles(StaticFiles):
    """The dashboard's static files, each with the pages' Content-Security-Policy."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(ASSET_HEADERS)
        return response


def install_ui(app: FastAPI, *, metrics_csv: str | Path | None = None) -> None:
    """Mount the dashboard's pages under /ui and its assets under /ui/static.

    `metrics_csv`: the training run's metrics.csv the training page charts (else the metrics stored with
    each published version)."""
    app.state.ui_metrics_csv = Path(metrics_csv) if metrics_csv is not None else None
    app.state.ui_metrics_cache = MetricsCache()
    app.include_router(router)
    app.mount("/ui/static", DashboardFiles(directory=HERE / "static"), name="ui-static")

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, PageRefused)
        if exc.status in (400, 401):
            return render(
                request, "login.html", status=exc.status, next_url=exc.next_url, message=exc.message
            )
        return render(request, "error.html", status=exc.status, message=exc.message, caller=None)

    async def failed(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, PageError)
        return render(request, "error.html", status=exc.status, message=exc.message, caller=None)

    app.add_exception_handler(PageRefused, refused)
    app.add_exception_handler(PageError, failed)


__all__ = ["install_ui"]
