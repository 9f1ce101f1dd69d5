"""run_server: serve a checkpoint over HTTP with uvicorn."""

from __future__ import annotations

from pathlib import Path

import uvicorn

from lightningrl.serving.app import create_app


def run_server(
    checkpoint_dir: str | Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    device: str | None = None,
    *,
    max_batch_size: int = 16,
    batch_wait_ms: float = 5.0,
    served_model_name: str | None = None,
    cpu_threads: int | None = None,
    log_level: str = "info",
) -> None:
    """Serve `checkpoint_dir` at http://host:port/v1 until interrupted (blocking)."""
    app = create_app(
        checkpoint_dir,
        device=device,
        max_batch_size=max_batch_size,
        batch_wait_ms=batch_wait_ms,
        served_model_name=served_model_name,
        cpu_threads=cpu_threads,
    )
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)
