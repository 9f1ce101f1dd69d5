"""LocalStack: the store server (with its LLM proxy) and an inference server, in this event loop.

One machine, one process: what the demo and the end-to-end tests run on. At scale the same pieces
run as `lightningrl store serve` and `lightningrl serve-model` (or vLLM) processes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from lightningstore import LightningStore, semconv
from lightningstore.server.run import free_port


@contextlib.asynccontextmanager
async def serve_app(app: Any, port: int | None = None, *, start_timeout: float = 30.0) -> AsyncIterator[str]:
    """Serve an ASGI app with uvicorn on 127.0.0.1 inside the running loop; yields its base URL."""
    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    )
    task = asyncio.create_task(server.serve())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + start_timeout
    while not server.started:
        if task.done():
            task.result()  # raises the startup error
        if loop.time() > deadline:
            raise TimeoutError(f"uvicorn did not start on port {port} within {start_timeout}s")
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@dataclass
class StackUrls:
    store: str
    """The store server: REST API, OTLP ingest and the proxy under /proxy."""
    model: str
    """The inference server root; its OpenAI base URL is `model + "/v1"`."""

    @property
    def proxy(self) -> str:
        return self.store + semconv.PROXY_PREFIX

    @property
    def model_v1(self) -> str:
        return f"{self.model}/v1"


@contextlib.asynccontextmanager
async def local_stack(
    store: LightningStore,
    checkpoint: str | Path,
    *,
    model_name: str = "policy",
    max_batch_size: int = 64,
    cpu_threads: int | None = 1,
) -> AsyncIterator[StackUrls]:
    """Start the store server (proxy and gate included) on `store` and an inference server on `checkpoint`."""
    from lightningrl.serving import create_app as create_inference_app
    from lightningstore.server import build_app

    store_app = build_app(store)
    inference_app = create_inference_app(
        checkpoint, served_model_name=model_name, max_batch_size=max_batch_size, cpu_threads=cpu_threads
    )
    async with serve_app(inference_app) as model_url, serve_app(store_app) as store_url:
        yield StackUrls(store=store_url, model=model_url)
