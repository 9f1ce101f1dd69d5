"""The policy's inference servers and the version they serve: one object does every weight sync."""

from __future__ import annotations

from typing import Any

from lightningrl.serving.endpoint import ProxyPause, sync_weights
from lightningstore import LLM, LightningStore, ResourceVersion, semconv


class PolicyServers:
    """The trained LLM's endpoints and the version whose checkpoint they serve.

    `serve(version)` makes every endpoint serve that version's checkpoint (full weights or a LoRA
    adapter), with the store's model gateway paused and drained around the sync when the store is
    reached over HTTP; a no-op when they already serve it or `reload` is off (servers that reload
    themselves, or none at all)."""

    def __init__(self, store: LightningStore, llm: LLM, *, engine: str, reload: bool = True) -> None:
        self.llm = llm
        """The LLM as first published: its endpoints and model name (versions change only the checkpoint)."""
        self.engine = engine
        self.reload = reload
        self.served_version_id: str | None = None
        self._proxy = proxy_of(store)

    def started_on(self, version: ResourceVersion) -> None:
        """The servers were launched on `version`'s checkpoint."""
        self.served_version_id = version.version_id

    async def serve(self, version: ResourceVersion) -> dict[str, Any]:
        """Sync the endpoints to `version`; the sync's metrics (`sync/...`), or {} when nothing moved."""
        if self.served_version_id == version.version_id:
            return {}
        self.served_version_id = version.version_id
        if not self.reload:
            return {}
        resource = version.resource
        if not isinstance(resource, LLM) or not resource.checkpoint:
            raise ValueError(f"version {version.version_id} is not an LLM with a checkpoint to serve")
        return await sync_weights(
            self.llm.endpoints,
            str(resource.checkpoint),
            engine=self.engine,
            model=self.llm.model,
            proxy=self._proxy,
        )


def proxy_of(store: LightningStore) -> ProxyPause | None:
    """The model gateway of a store server reached over HTTP (paused around weight syncs); None for a
    store opened in this process, whose gateway (if any) this loop cannot reach."""
    base_url = getattr(store, "base_url", None)
    if not isinstance(base_url, str):
        return None
    return ProxyPause(base_url + semconv.PROXY_PREFIX, getattr(store, "auth_headers", None))
