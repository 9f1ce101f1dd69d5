"""Tell inference servers to load a new checkpoint (our server's POST /reload; vLLM-style roots)."""

from __future__ import annotations

from collections.abc import Sequence

import httpx


def server_root(endpoint: str) -> str:
    """`http://h:p/v1` -> `http://h:p`."""
    endpoint = endpoint.rstrip("/")
    return endpoint[: -len("/v1")] if endpoint.endswith("/v1") else endpoint


async def reload_endpoints(endpoints: Sequence[str], checkpoint: str, *, timeout: float = 120.0) -> None:
    """POST /reload {checkpoint} to every endpoint's server; raise naming the first that refuses."""
    async with httpx.AsyncClient(timeout=timeout) as client:
        for endpoint in endpoints:
            response = await client.post(f"{server_root(endpoint)}/reload", json={"checkpoint": checkpoint})
            if response.status_code >= 400:
                raise RuntimeError(
                    f"reload of {endpoint} with {checkpoint} failed: {response.status_code} {response.text}"
                )
