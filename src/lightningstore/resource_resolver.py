"""Which resource versions a rollout uses: the one rule the runner, the proxy and the release gate share.

The rule, for a rollout and the resource names asked for:

1. A rollout that names a resource set (`resources_id`) uses that set's versions, whatever its mode
   (train, val, test) and whoever runs it. The set is the binding its enqueuer chose and everything
   downstream attributes the rollout to it: a training step's set names the version being trained
   (the `latest` the algorithm just published), an evaluation's names the version measured (a
   candidate, or its parent), a canary's names the receipt's candidate beside the other resources'
   versions. A set never changes once stored, so this answer never goes stale.
2. A rollout without a resource set is production traffic: each name's `approved` version, the one
   the gate moves. It is read when the rollout resolves, so a promotion or a rollback reaches the
   next resolution. A name without an approved version resolves to nothing (`missing`).
3. A production runner (`production=True`) serves only approved versions. Rule 2 already holds for
   rollouts without a set; a set naming any other version is refused (`check_production`), never
   swapped for the approved one: the proxy would still serve the set's version, and the rollout's
   results would be counted as evidence for a version that did not produce them.

The rollout's mode changes the sampling the proxy writes (`LLM.mode_sampling`), never the version.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from lightningstore.data.resource import ResourceSet, ResourceVersion
from lightningstore.store import LightningStore

SetLookup = Callable[[str], Awaitable[ResourceSet | None]]
"""How a resource set is read by id (the store's `get_resources_by_id`, or a cache in front of it)."""


class ResourceResolutionError(RuntimeError):
    """The rollout's resources could not be resolved (an unknown set, or a refused production run)."""


@dataclass(frozen=True)
class Resolved:
    """The versions a rollout uses, by name, and where they came from."""

    versions: dict[str, ResourceVersion]
    resources_id: str | None
    """The rollout's resource set (rule 1), or None: the `approved` pointers (rule 2)."""
    missing: list[str] = field(default_factory=list)
    """Names asked for that have no approved version (rule 2 only)."""

    @property
    def fixed(self) -> bool:
        """Whether the answer can never change (a resource set, not a pointer)."""
        return self.resources_id is not None


async def default_names(store: LightningStore) -> list[str]:
    """The names a rollout without a set resolves: the newest set's, else every stored name."""
    newest = await store.get_latest_resources()
    if newest is not None:
        return list(newest.versions)
    return sorted({v.name for v in await store.list_resource_versions()})


async def resolve(
    store: LightningStore,
    resources_id: str | None,
    names: Iterable[str] | None = None,
    *,
    get_set: SetLookup | None = None,
) -> Resolved:
    """The versions of a rollout naming `resources_id` (None: no set), by the module's rule.

    `names` limits the answer for a rollout without a set (default: `default_names`); a set's
    versions are all returned. ResourceResolutionError when the set is not stored.
    """
    if resources_id is not None:
        bound = await (get_set or store.get_resources_by_id)(resources_id)
        if bound is None:
            raise ResourceResolutionError(f"unknown resources_id {resources_id!r}")
        return Resolved(dict(bound.versions), resources_id)
    versions: dict[str, ResourceVersion] = {}
    missing: list[str] = []
    for name in names if names is not None else await default_names(store):
        version = await store.get_approved_version(name)
        if version is None:
            missing.append(name)
        else:
            versions[name] = version
    return Resolved(versions, None, missing)


async def check_production(store: LightningStore, resolved: Resolved) -> None:
    """Refuse (ResourceResolutionError) a set naming a version that is not its name's `approved` one:
    what a production runner may not serve (rule 3)."""
    if resolved.resources_id is None:
        return
    for name, version in resolved.versions.items():
        approved = await store.get_approved_version(name)
        if approved is None or approved.version_id != version.version_id:
            raise ResourceResolutionError(
                f"resource set {resolved.resources_id!r} names {name!r} version {version.version_id}, "
                f"but its approved version is {approved.version_id if approved else None}: "
                "a production runner serves only approved versions"
            )
