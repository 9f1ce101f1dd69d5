"""Endpoint: one inference server as the RL loop sees it, and how it takes new weights, per engine.

- ours (`lightningrl serve-model`): `POST /reload {checkpoint}`; batches already running finish on
  the weights they started with, the next batch uses the new ones.
- vLLM: its dev-mode routes (`VLLM_SERVER_DEV_MODE=1`, set by `vllm_env`): `POST /pause?mode=wait`
  (in-flight requests finish, new ones queue), `POST /collective_rpc {"method": "reload_weights",
  "kwargs": {"weights_path": DIR}}` (re-reads the safetensors in place, ~0.05 s on a tiny model),
  `POST /reset_prefix_cache` (cached blocks hold keys of the old weights), `POST /resume`. A model
  whose output head is tied to its embeddings reloads through our worker extension's
  `lightningrl_reload_weights` instead: vLLM's own reload keeps a tied head's old prepacked weight.
  A LoRA version is an adapter directory: `POST /v1/load_lora_adapter {lora_name, lora_path,
  load_inplace}` under the LLM's model name, inside the same pause.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import httpx

from lightningrl.models.adapter import is_adapter_dir
from lightningrl.serving.reload_token import reload_headers
from lightningrl.serving.vllm import (
    EXTENSION_PATH,
    RELOAD_METHOD,
    WORKER_EXTENSION,
    check_reloadable,
    tied_output_head,
)

ENGINE_NAMES = ("ours", "vllm")


def server_root(endpoint: str) -> str:
    """`http://h:p/v1` -> `http://h:p`."""
    endpoint = endpoint.rstrip("/")
    return endpoint[: -len("/v1")] if endpoint.endswith("/v1") else endpoint


def _check(response: httpx.Response, what: str) -> httpx.Response:
    if response.status_code >= 400:
        raise RuntimeError(f"{what} failed: {response.status_code} {response.text[:500]}")
    return response


class Endpoint(ABC):
    """An OpenAI-compatible inference server (`url` is its `/v1` base URL)."""

    engine: str

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.root = server_root(url)

    @abstractmethod
    async def sync_weights(
        self, client: httpx.AsyncClient, checkpoint: str, model: str | None = None
    ) -> None:
        """Serve `checkpoint` from now on (no request fails meanwhile): a full model directory, or a
        PEFT adapter directory (`adapter_config.json`) served as model `model`."""

    async def load_adapter(self, client: httpx.AsyncClient, name: str, path: str) -> None:
        """Serve the LoRA adapter at `path` as model `name` (replacing an adapter of that name)."""
        raise NotImplementedError(f"the {self.engine} engine at {self.url} does not serve LoRA adapters")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


class OurEndpoint(Endpoint):
    """`lightningrl serve-model`."""

    engine = "ours"

    async def sync_weights(
        self, client: httpx.AsyncClient, checkpoint: str, model: str | None = None
    ) -> None:
        # A LoRA adapter directory too: our server loads it merged into its base (lightningrl.models.adapter).
        response = await client.post(
            f"{self.root}/reload", json={"checkpoint": checkpoint}, headers=reload_headers()
        )
        _check(response, f"reload of {self.url} with {checkpoint}")


class VllmEndpoint(Endpoint):
    """vLLM's OpenAI server, started with `VLLM_SERVER_DEV_MODE=1` (see `lightningrl.serving.vllm`)."""

    engine = "vllm"

    async def sync_weights(
        self, client: httpx.AsyncClient, checkpoint: str, model: str | None = None
    ) -> None:
        adapter = is_adapter_dir(checkpoint)
        if adapter and not model:
            raise ValueError(f"{checkpoint} is a LoRA adapter: name the model it is served as")
        if not adapter:
            check_reloadable(checkpoint)
        _check(await client.post(f"{self.root}/pause", params={"mode": "wait"}), f"pause of {self.url}")
        try:
            if adapter:
                # The version's adapter replaces the one served under the LLM's model name.
                await self.load_adapter(client, str(model), checkpoint)
            else:
                await self._reload(client, checkpoint)
            _check(await client.post(f"{self.root}/reset_prefix_cache"), f"reset_prefix_cache of {self.url}")
        finally:
            _check(await client.post(f"{self.root}/resume"), f"resume of {self.url}")

    async def _reload(self, client: httpx.AsyncClient, checkpoint: str) -> None:
        """Reload the full model at `checkpoint` in place (a tied head through the extension)."""
        tied = tied_output_head(checkpoint)
        method = RELOAD_METHOD if tied else "reload_weights"
        body = {"method": method, "kwargs": {"weights_path": str(Path(checkpoint))}}
        response = await client.post(f"{self.root}/collective_rpc", json=body)
        if tied and response.status_code >= 400:
            raise RuntimeError(
                f"{method} of {self.url} from {checkpoint} failed ({response.status_code} "
                f"{response.text[:300]}): a model with a tied output head needs vLLM started with "
                f"`--worker-extension-cls {WORKER_EXTENSION}` and PYTHONPATH={EXTENSION_PATH} "
                "(`lightningrl serve-model --engine vllm` and fit do this)"
            )
        _check(response, f"{method} of {self.url} from {checkpoint}")
        if tied:
            results = response.json().get("results") or [{}]
            if not all(isinstance(r, dict) and r.get("retied") for r in results):
                raise RuntimeError(
                    f"{method} of {self.url} from {checkpoint} rebuilt no tied output head ({results}): "
                    "the served head would keep the old weights"
                )

    async def load_adapter(self, client: httpx.AsyncClient, name: str, path: str) -> None:
        body = {"lora_name": name, "lora_path": str(path), "load_inplace": True}
        response = await client.post(f"{self.root}/v1/load_lora_adapter", json=body)
        _check(response, f"loading adapter {name!r} from {path} into {self.url}")


ENDPOINTS: dict[str, type[Endpoint]] = {"ours": OurEndpoint, "vllm": VllmEndpoint}


async def detect_engine(client: httpx.AsyncClient, url: str) -> str:
    """Which engine serves `url`: vLLM answers `GET /version`, ours `GET /healthz` with a checkpoint."""
    root = server_root(url)
    try:
        version = await client.get(f"{root}/version")
        if version.is_success and "version" in _json(version):
            return "vllm"
        health = await client.get(f"{root}/healthz")
        if health.is_success and "checkpoint" in _json(health):
            return "ours"
    except httpx.HTTPError as error:
        raise RuntimeError(f"could not reach the inference server {url}: {error!r}") from error
    raise RuntimeError(
        f"{url} is neither vLLM (GET /version) nor a lightningrl server (GET /healthz); "
        "set LightningRLConfig.engine to say which engine it is"
    )


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


async def endpoint_for(client: httpx.AsyncClient, url: str, engine: str = "auto") -> Endpoint:
    """The Endpoint of `url`; engine "auto" asks the server which engine it is."""
    if engine == "auto":
        engine = await detect_engine(client, url)
    if engine not in ENDPOINTS:
        raise ValueError(f"engine must be one of {('auto', *ENGINE_NAMES)}, got {engine!r}")
    return ENDPOINTS[engine](url)


class ProxyPause:
    """The store server's model gateway (`/proxy/admin/...`): pause new calls, drain, resume."""

    def __init__(self, proxy_url: str, headers: dict[str, str] | None = None) -> None:
        self.url = proxy_url.rstrip("/")
        self.headers = dict(headers or {})

    async def pause(self, client: httpx.AsyncClient) -> None:
        _check(await client.post(f"{self.url}/admin/pause", headers=self.headers), "pausing the proxy")

    async def drain(self, client: httpx.AsyncClient, timeout_s: float) -> dict[str, Any]:
        response = await client.post(
            f"{self.url}/admin/drain", params={"timeout_s": timeout_s}, headers=self.headers
        )
        return _check(response, "draining the proxy").json()

    async def resume(self, client: httpx.AsyncClient) -> None:
        _check(await client.post(f"{self.url}/admin/resume", headers=self.headers), "resuming the proxy")


async def sync_weights(
    endpoints: list[str],
    checkpoint: str,
    *,
    engine: str = "auto",
    model: str | None = None,
    proxy: ProxyPause | None = None,
    drain_timeout_s: float = 60.0,
    timeout: float = 300.0,
) -> dict[str, float]:
    """Make every endpoint serve `checkpoint` (a model, or a LoRA adapter served as `model`): pause
    the proxy (new calls wait), drain the calls in flight, sync each endpoint, resume. Returns
    timings for the step's metrics row."""
    started = time.perf_counter()
    row: dict[str, float] = {}
    async with httpx.AsyncClient(timeout=timeout) as client:
        targets = [await endpoint_for(client, url, engine) for url in endpoints]
        if proxy is not None:
            await proxy.pause(client)
        try:
            if proxy is not None:
                drained = await proxy.drain(client, drain_timeout_s)
                row["sync/drain_seconds"] = float(drained.get("waited_ms", 0.0)) / 1e3
                row["sync/drained"] = float(bool(drained.get("drained")))
            t0 = time.perf_counter()
            for target in targets:
                await target.sync_weights(client, checkpoint, model)
            row["sync/reload_seconds"] = time.perf_counter() - t0
        finally:
            if proxy is not None:
                await proxy.resume(client)
    row["sync/seconds"] = time.perf_counter() - started
    return row
