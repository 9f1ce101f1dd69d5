"""Where a version resolves, and where production traffic is routed now (as the runner and proxy decide)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from lightningstore import LLM, LightningStore, Rollout, RolloutConfig, RolloutMode, RolloutStatus
from lightningstore.proxy import ProxyConfig
from lightningstore.proxy.binding import bind
from runner.resources import ResourceResolutionError, resolve_versions

PROBE_ID = "gate-routing-probe"


@dataclass(frozen=True)
class Resolution:
    """Whether a version can be loaded, and why not."""

    ok: bool
    reason: str


def _local_path(reference: str | None) -> Path | None:
    if not reference or "://" in reference:
        return None
    return Path(reference)


async def resolve_version(store: LightningStore, version_id: str | None) -> Resolution:
    """The version exists and its checkpoint and artifact, when local paths, exist."""
    if version_id is None:
        return Resolution(False, "there is no parent version")
    version = await store.get_resource_version(version_id)
    if version is None:
        return Resolution(False, f"version {version_id} is not stored")
    references = [version.artifact]
    if isinstance(version.resource, LLM):
        references.append(version.resource.checkpoint)
    for reference in references:
        path = _local_path(reference)
        if path is not None and not path.exists():
            return Resolution(False, f"version {version_id}: artifact {reference} does not exist")
    return Resolution(True, f"version {version_id} resolves ({version.resource.kind})")


async def production_routes(store: LightningStore, name: str) -> dict[str, str | None]:
    """The version of `name` a production rollout (no resources_id) gets now: from the runner's resolution
    and, for an LLM, from the proxy's binding. Nothing is written."""
    probe = Rollout(
        rollout_id=PROBE_ID,
        input=None,
        mode=RolloutMode.TEST,
        config=RolloutConfig(),
        status=RolloutStatus.RUNNING,
        enqueue_time=time.time(),
    )
    routes: dict[str, str | None] = {}
    try:
        versions = await resolve_versions(store, probe, production=True)
        routes["runner"] = next((v.version_id for v in versions if v.name == name), None)
    except ResourceResolutionError:
        routes["runner"] = None
    approved = await store.get_approved_version(name)
    if approved is not None and isinstance(approved.resource, LLM):
        binding = await bind(store, ProxyConfig(resource_name=name, pointer_ttl_s=0), PROBE_ID, None)
        routes["proxy"] = binding.llms[0].version_id if binding.llms else None
    return routes
