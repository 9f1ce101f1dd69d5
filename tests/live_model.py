"""Live servers on 127.0.0.1 shared by test folders: uvicorn in a thread, and the tiny model behind the
project's inference server (import the fixtures into a folder's conftest to use them there)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


def serve_in_thread(app: object, name: str) -> tuple[str, object, object]:
    """Start uvicorn for `app` on a free loopback port in a daemon thread; (url, server, thread)."""
    import socket
    import threading
    import time

    import uvicorn

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")  # type: ignore[arg-type]
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, f"{name} did not start"
    return f"http://127.0.0.1:{port}", server, thread


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny checkpoint (built once per session)."""
    from lightningrl.demos.tinylm import build_tiny_model

    return build_tiny_model(
        tmp_path_factory.mktemp("tiny") / "model", seed=0, hidden_size=64, num_layers=2, num_heads=4
    )


@pytest.fixture(scope="session")
def inference_url(tiny_model: Path) -> Iterator[str]:
    """The tiny model behind the project's OpenAI-compatible inference server: its base URL (…/v1)."""
    from lightningrl.serving import create_app

    # Served under the name the tests' LLM resources ask for: AutoGen warns when a reply names another.
    app = create_app(
        tiny_model, device="cpu", max_batch_size=8, batch_wait_ms=5, cpu_threads=1, served_model_name="tiny"
    )
    url, server, thread = serve_in_thread(app, "test-inference")
    yield f"{url}/v1"
    server.should_exit = True  # type: ignore[attr-defined]
    thread.join(timeout=10)  # type: ignore[attr-defined]
