"""The resources page: per resource name, its versions as a chain (parents before children), where
`latest` and `approved` point, and every pointer move."""

from __future__ import annotations

from dataclasses import dataclass

from lightningstore.data.resource import PointerMove, ResourceVersion
from lightningstore.store import LightningStore


@dataclass(frozen=True)
class VersionRow:
    version: ResourceVersion
    depth: int
    pointers: list[str]


@dataclass(frozen=True)
class ResourceChain:
    name: str
    latest: str | None
    approved: str | None
    rows: list[VersionRow]
    history: list[PointerMove]


async def resource_chains(store: LightningStore) -> list[ResourceChain]:
    by_name: dict[str, list[ResourceVersion]] = {}
    for version in await store.list_resource_versions():
        by_name.setdefault(version.name, []).append(version)
    chains = []
    for name, versions in sorted(by_name.items()):
        latest = await store.get_pointer(name, "latest")
        approved = await store.get_pointer(name, "approved")
        pointed = {
            "latest": latest.version_id if latest else None,
            "approved": approved.version_id if approved else None,
        }
        chains.append(
            ResourceChain(
                name=name,
                latest=pointed["latest"],
                approved=pointed["approved"],
                rows=_chain(versions, pointed),
                history=list(reversed(await store.query_pointer_history(name))),
            )
        )
    return chains


def _chain(versions: list[ResourceVersion], pointed: dict[str, str | None]) -> list[VersionRow]:
    """Depth-first from the roots (oldest first), so each version sits under its exact parent; siblings
    (versions published from the same parent) are indented one step under it."""
    ids = {v.version_id for v in versions}
    children: dict[str | None, list[ResourceVersion]] = {}
    for v in versions:  # oldest first, as listed
        children.setdefault(v.parent_id if v.parent_id in ids else None, []).append(v)
    rows: list[VersionRow] = []
    stack = [(v, 0) for v in reversed(children.get(None, []))]
    seen: set[str] = set()
    while stack:
        version, depth = stack.pop()
        if version.version_id in seen:
            continue
        seen.add(version.version_id)
        marks = [p for p, vid in pointed.items() if vid == version.version_id]
        rows.append(VersionRow(version=version, depth=depth, pointers=marks))
        kids = children.get(version.version_id, [])
        # A straight chain stays at one depth; only a branch point indents its children.
        stack += [(c, depth + (len(kids) > 1)) for c in reversed(kids)]
    return rows
