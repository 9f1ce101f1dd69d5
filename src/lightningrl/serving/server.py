"""run_server: serve a checkpoint over HTTP with uvicorn."""

from __future__ import annotations

from pathlib import Path
from typing import Unpack

import uvicorn

from lightningrl.serving.app import create_app
from lightningrl.serving.service import ServingOptions


def run_server(
    checkpoint_dir: str | Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    log_level: str = "info",
    reload_token: str | None = None,
    api_key: str | None = None,
    **options: Unpack[ServingOptions],
) -> None:
    """Serve `checkpoint_dir` at http://host:port/v1 until interrupted (blocking); `options` as for
    `InferenceService` (device, batching, served name, CPU threads); `reload_token` guards `/reload`, `api_key` the `/v1` routes."""
    app = create_app(checkpoint_dir, reload_token=reload_token, api_key=api_key, **options)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)
