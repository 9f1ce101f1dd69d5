"""Upstream: sends a call to the rollout's endpoints over one shared client, retrying with backoff."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import httpx
import orjson

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


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(0.0, float(response.headers.get("retry-after", "0")))
    except ValueError:
        return 0.0


class Upstream:
    """Posts one call to its endpoints: the rollout's home first, the next one after a connection error."""

    def __init__(self, client: httpx.AsyncClient, config: ProxyConfig) -> None:
        self.client = client
        self._config = config
        self._urls: dict[tuple[str, str], httpx.URL] = {}
        self._headers = {"content-type": "application/json", **dict(config.upstream_headers)}

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
        self, endpoints: Sequence[str], path: str, body: JSON, record: CallRecord, *, stream: bool
    ) -> httpx.Response:
        """The upstream's final response (streaming: opened, unread, to be closed by the caller).

        A 408/429/5xx answer is retried and, when retries run out, returned as it is; a connection
        failure moves to the next endpoint and raises ProxyError(502) when retries run out.
        """
        payload = orjson.dumps(body)
        headers = {**self._headers, "accept": "text/event-stream" if stream else "application/json"}
        failovers = 0
        last_error = ""
        for retry in range(self._config.max_retries + 1):
            endpoint = endpoints[failovers % len(endpoints)]
            record.upstream, record.retries = endpoint, retry
            request = self.client.build_request(
                "POST", self._url(endpoint, path), content=payload, headers=headers
            )
            floor = 0.0
            try:
                response = await self.client.send(request, stream=stream)
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
                await response.aclose()
            if retry < self._config.max_retries:
                await asyncio.sleep(self.backoff(retry, floor))
        raise ProxyError(
            502, f"upstream unreachable after {self._config.max_retries + 1} tries ({last_error})"
        )
