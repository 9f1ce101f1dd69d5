"""Our inference server's `/reload` decides which weights the policy samples with: with a reload token
configured, only a caller holding it may swap them (the weight sync sends its process's token)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from live_model import serve_in_thread, tiny_model

from lightningrl.serving import create_app
from lightningrl.serving.endpoint import OurEndpoint
from lightningrl.serving.reload_token import RELOAD_TOKEN_ENV

__all__ = ["tiny_model"]
TOKEN = "reload-token-of-this-run"


@pytest.fixture
def guarded_server(tiny_model: Path) -> Iterator[str]:
    app = create_app(tiny_model, device="cpu", max_batch_size=2, cpu_threads=1, reload_token=TOKEN)
    url, server, thread = serve_in_thread(app, "guarded-inference")
    yield url
    server.should_exit = True  # type: ignore[attr-defined]
    thread.join(timeout=10)  # type: ignore[attr-defined]


async def test_reload_needs_the_token(
    guarded_server: str, tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = str(tmp_path / "an-agents-model")
    async with httpx.AsyncClient(base_url=guarded_server, timeout=60) as client:
        for headers in ({}, {"Authorization": "Bearer guessed"}, {"Authorization": TOKEN}):
            refused = await client.post("/reload", json={"checkpoint": elsewhere}, headers=headers)
            assert refused.status_code == 401, refused.text
            assert "reload token" in refused.json()["error"]["message"]
        assert (await client.get("/metrics")).json()["reloads"] == 0

        endpoint = OurEndpoint(f"{guarded_server}/v1")
        monkeypatch.delenv(RELOAD_TOKEN_ENV, raising=False)
        with pytest.raises(RuntimeError, match="401"):
            await endpoint.sync_weights(client, str(tiny_model))
        monkeypatch.setenv(RELOAD_TOKEN_ENV, TOKEN)
        await endpoint.sync_weights(client, str(tiny_model))
        assert (await client.get("/metrics")).json()["reloads"] == 1
