"""ClientPool: the StoreClient's keep-alive connections, spread over several small httpx clients."""

from __future__ import annotations

from typing import Any

import httpx


class ClientPool:
    """httpx.AsyncClients of at most PER_CLIENT connections each, made on demand; a request goes to
    the least busy one. httpcore scans every connection of its pool per request, so one pool of
    many connections costs several times the CPU of several small pools under concurrency."""

    PER_CLIENT = 4

    def __init__(
        self,
        base_url: str,
        headers: dict[str, str],
        *,
        timeout: float,
        max_connections: int,
        transport: httpx.AsyncBaseTransport | None,
    ) -> None:
        self._make = lambda: httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=timeout,
            transport=transport,
            limits=httpx.Limits(max_connections=self.PER_CLIENT, max_keepalive_connections=self.PER_CLIENT),
        )
        self._max_clients = 1 if transport is not None else max(1, -(-max_connections // self.PER_CLIENT))
        self._clients: list[httpx.AsyncClient] = []
        self._busy: list[int] = []

    def _pick(self) -> int:
        if self._clients:
            index = min(range(len(self._busy)), key=self._busy.__getitem__)
            if self._busy[index] < self.PER_CLIENT or len(self._clients) >= self._max_clients:
                return index
        self._clients.append(self._make())
        self._busy.append(0)
        return len(self._clients) - 1

    async def request(
        self, method: str, path: str, *, timeout: float | None = None, **kwargs: Any
    ) -> httpx.Response:
        kwargs["timeout"] = httpx.USE_CLIENT_DEFAULT if timeout is None else timeout
        index = self._pick()
        self._busy[index] += 1
        try:
            return await self._clients[index].request(method, path, **kwargs)
        finally:
            self._busy[index] -= 1

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
        self._clients.clear()
        self._busy.clear()
