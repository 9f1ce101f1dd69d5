"""Upstream: sends a call to the rollout's endpoints over keep-alive connections, retrying with backoff."""

from __future__ import annotations

import asyncio
import os
import random
import urllib.request
from collections.abc import Sequence
from urllib.parse import urlsplit

import httpx
import orjson

from lightningstore.client.wire import WirePool, WireResponse
from lightningstore.data.resource import LLM
from lightningstore.llm_record import CallRecord
from lightningstore.proxy.config import ProxyConfig
from lightningstore.proxy.errors import ProxyError
from lightningstore.proxy.request import JSON

URL_CACHE_SIZE = 1024


def retryable(status: int) -> bool:
    """408, 429 and 5xx (but 501: the upstream will never implement it) are worth another try."""
    return status in (408, 429) or (status >= 500 and status != 501)


# Failures before or instead of a response; worth another try (a read timeout is not: it already waited).
RETRY_ERRORS = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)


def new_client(config: ProxyConfig) -> httpx.AsyncClient:
    """The keep-alive client every call shares."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(config.upstream_timeout_s, connect=config.connect_timeout_s),
        limits=httpx.Limits(
            max_connections=config.max_connections,
            max_keepalive_connections=config.max_keepalive_connections,
        ),
        trust_env=config.trust_env,
    )


UpstreamResponse = httpx.Response | WireResponse


def upstream_key(llm: LLM) -> str | None:
    """The API key the LLM's endpoints want (its `api_key_env`, read from this process's environment at
    each call), None when it names none; ProxyError(502) naming the variable when it is not set."""
    if llm.api_key_env is None:
        return None
    key = os.environ.get(llm.api_key_env)
    if not key:
        raise ProxyError(
            502, f"the gateway has no ${llm.api_key_env} in its environment (the API key of {llm.model!r})"
        )
    return key


def _retry_after(response: UpstreamResponse) -> float:
    try:
        return max(0.0, float(response.headers.get("retry-after", "0")))
    except ValueError:
        return 0.0


def _env_proxied(endpoint: str) -> bool:
    """Whether HTTP(S)_PROXY / ALL_PROXY (minus NO_PROXY) would route `endpoint` through a proxy."""
    url = urlsplit(endpoint)
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get(url.scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass_environment(url.hostname or "", proxies)


class Upstream:
    """Posts one call to its endpoints: the rollout's home first, the next one after a connection error.

    A whole (non-streamed) call goes over our own keep-alive connections (`WirePool`): httpx's layers
    were about half of the gateway loop's busy time per call. Streams, and endpoints that the environment routes
    through an HTTP proxy, use the shared httpx client.
    """

    def __init__(self, client: httpx.AsyncClient, config: ProxyConfig) -> None:
        self.client = client
        self._config = config
        self._urls: dict[tuple[str, str], httpx.URL] = {}
        self._headers = {"content-type": "application/json", **dict(config.upstream_headers)}
        self._pools: dict[tuple[str, str | None], WirePool | None] = {}

    def _pool(self, endpoint: str, api_key: str | None) -> WirePool | None:
        """The endpoint's own connections with `api_key` (None: use httpx), made on first use."""
        pool_key = (endpoint, api_key)
        if pool_key not in self._pools:
            if len(self._pools) >= URL_CACHE_SIZE:
                self._pools.clear()  # connections of dropped pools close with their transports
            lean = urlsplit(endpoint).scheme in ("http", "https") and not (
                self._config.trust_env and _env_proxied(endpoint)
            )
            self._pools[pool_key] = (
                WirePool(
                    endpoint.rstrip("/"),
                    self._with_key(api_key),
                    timeout=self._config.upstream_timeout_s,
                    max_connections=self._config.max_connections,
                    connect_timeout=self._config.connect_timeout_s,
                )
                if lean
                else None
            )
        return self._pools[pool_key]

    def _with_key(self, api_key: str | None) -> dict[str, str]:
        """The upstream headers, with `Authorization: Bearer <api_key>` when there is a key."""
        return {**self._headers, "authorization": f"Bearer {api_key}"} if api_key else self._headers

    async def aclose(self) -> None:
        """Close the lean connections (the httpx client is closed by its owner)."""
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            if pool is not None:
                await pool.aclose()

    async def _post(
        self, endpoint: str, path: str, payload: bytes, stream: bool, api_key: str | None
    ) -> UpstreamResponse:
        pool = None if stream else self._pool(endpoint, api_key)
        if pool is not None:
            return await pool.request("POST", path, content=payload)
        headers = {**self._with_key(api_key), "accept": "text/event-stream" if stream else "application/json"}
        request = self.client.build_request(
            "POST", self._url(endpoint, path), content=payload, headers=headers
        )
        return await self.client.send(request, stream=stream)

    def _url(self, endpoint: str, path: str) -> httpx.URL:
        """The parsed URL of `path` on `endpoint`, cached: parsing costs more than the rest of a request."""
        key = (endpoint, path)
        url = self._urls.get(key)
        if url is None:
            if len(self._urls) >= URL_CACHE_SIZE:
                self._urls.clear()
            url = self._urls[key] = httpx.URL(endpoint.rstrip("/") + path)
        return url

    def backoff(self, retry: int, floor: float = 0.0) -> float:
        """Seconds before retry number `retry` (0-based): exponential, half of it jittered, bounded."""
        ceiling = min(self._config.backoff_max_s, self._config.backoff_base_s * 2**retry)
        return min(self._config.backoff_max_s, max(floor, ceiling / 2 + random.uniform(0, ceiling / 2)))

    async def send(
        self,
        endpoints: Sequence[str],
        path: str,
        body: JSON,
        record: CallRecord,
        *,
        stream: bool,
        api_key: str | None = None,
    ) -> UpstreamResponse:
        """The upstream's final response (streaming: opened, unread, to be closed by the caller), sent
        with `Authorization: Bearer <api_key>` when given (`upstream_key`).

        A 408/429/5xx answer is retried and, when retries run out, returned as it is; a connection
        failure moves to the next endpoint and raises ProxyError(502) when retries run out.
        """
        payload = orjson.dumps(body)
        failovers = 0
        last_error = ""
        for retry in range(self._config.max_retries + 1):
            endpoint = endpoints[failovers % len(endpoints)]
            record.upstream, record.retries = endpoint, retry
            floor = 0.0
            try:
                response = await self._post(endpoint, path, payload, stream, api_key)
            except httpx.TimeoutException as error:
                if not isinstance(error, httpx.ConnectTimeout | httpx.PoolTimeout):
                    raise ProxyError(504, f"upstream {endpoint} timed out: {type(error).__name__}") from None
                failovers += 1
                last_error = f"{type(error).__name__}: {error}"
            except RETRY_ERRORS as error:
                failovers += 1
                last_error = f"{type(error).__name__}: {error}"
            else:
                if not retryable(response.status_code) or retry == self._config.max_retries:
                    return response
                floor = _retry_after(response)
                last_error = f"status {response.status_code}"
                if isinstance(response, httpx.Response):
                    await response.aclose()
            if retry < self._config.max_retries:
                await asyncio.sleep(self.backoff(retry, floor))
        raise ProxyError(
            502, f"upstream unreachable after {self._config.max_retries + 1} tries ({last_error})"
        )
