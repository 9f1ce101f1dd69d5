"""A live store server (REST + proxy + gate, with role tokens) and a stub model upstream with two routes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from lightningstore import SqlStore
from lightningstore.auth import TokenConfig
from lightningstore.proxy import ProxyConfig
from lightningstore.server import build_app
from lightningstore.server.run import free_port

SECRET = "gate-agent-secret"
TOKENS = {"admin": "adm", "algorithm": "alg", "runner": "run", "approver": "apr"}


@contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """Serve `app` on a free loopback port in a thread; yields its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def stub_upstream() -> FastAPI:
    """An OpenAI-compatible stub at /{route}/v1 answering with the route's name (which model served)."""
    app = FastAPI()

    @app.post("/{route}/v1/chat/completions")
    async def chat(route: str, request: Request) -> JSONResponse:
        body: dict[str, Any] = orjson.loads(await request.body())
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": f"served by {route}"},
            "finish_reason": "stop",
            "logprobs": {"content": [{"token": "x", "logprob": -0.5, "bytes": [], "top_logprobs": []}] * 3},
            "token_ids": [5, 6, 7],
        }
        return JSONResponse(
            {
                "id": "chatcmpl-stub",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [choice],
                "usage": {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5},
                "prompt_token_ids": [1, 2],
            }
        )

    return app


def store_app(store: SqlStore) -> FastAPI:
    return build_app(
        store,
        tokens=TokenConfig.from_mapping({**TOKENS, "agent_secret": SECRET}),
        proxy=ProxyConfig(pointer_ttl_s=0.0),
        sweep_interval=None,
    )
