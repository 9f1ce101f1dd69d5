"""Resource routes: versions, sets, and the `latest` / `approved` pointers (approved: the gate's approvers)."""

from __future__ import annotations

from typing import Literal

from fastapi import Request

from lightningstore.auth.tokens import Permission
from lightningstore.data.resource import Pointer, PointerMove, ResourceSet, ResourceVersion
from lightningstore.errors import found
from lightningstore.gate.authority import pointer_actor, require_default_approver
from lightningstore.http_api import AddResourcesBody, AddVersionBody, MovePointerBody, ResourceSetBody
from lightningstore.server.auth import context


async def add_resource_version(request: Request, body: AddVersionBody) -> ResourceVersion:
    """Publish a version and move `latest`; idempotent on `version_id`."""
    store, caller = context(request)
    caller.require(Permission.PUBLISH)
    return await store.add_resource_version(**dict(body))


async def list_resource_versions(request: Request, name: str | None = None) -> list[ResourceVersion]:
    """Versions (of one name, or all), oldest first."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return await store.list_resource_versions(name)


async def get_resource_version(request: Request, version_id: str) -> ResourceVersion:
    """One version (404 if unknown)."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return found(await store.get_resource_version(version_id), "resource version", version_id)


async def add_resources(request: Request, body: AddResourcesBody) -> ResourceSet:
    """Publish one version per name and bind them in a new set."""
    store, caller = context(request)
    caller.require(Permission.PUBLISH)
    return await store.add_resources(body.resources, created_by=body.created_by, parents=body.parents)


async def add_resource_set(request: Request, body: ResourceSetBody) -> ResourceSet:
    """Bind existing versions into a new set."""
    store, caller = context(request)
    caller.require(Permission.PUBLISH)
    return await store.add_resource_set(body.versions)


async def get_latest_resources(request: Request) -> ResourceSet | None:
    """The most recently created set, or null."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return await store.get_latest_resources()


async def get_resources(request: Request, resources_id: str) -> ResourceSet:
    """One set (404 if unknown)."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return found(await store.get_resources_by_id(resources_id), "resource set", resources_id)


async def get_pointer(
    request: Request, name: str, pointer: Literal["latest", "approved"]
) -> ResourceVersion | None:
    """The version a resource's pointer names, or null."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return await store.get_pointer(name, pointer)


async def move_pointer(request: Request, body: MovePointerBody) -> PointerMove:
    """Move `latest` (publish rights) or `approved` (an approver the gate policy names, or admin); the
    move records the credentials' identity as its actor, the stated `actor` after it when it differs."""
    store, caller = context(request)
    actor = body.actor
    if body.pointer == Pointer.APPROVED:
        caller.require(Permission.APPROVE)
        gate = getattr(request.app.state, "gate", None)
        if gate is not None:
            await require_default_approver(gate, caller, body.name)
        actor = pointer_actor(caller, body.actor)
    else:
        caller.require(Permission.PUBLISH)
    return await store.move_pointer(
        body.name, body.pointer.value, body.version_id, actor=actor, reason=body.reason
    )


async def query_pointer_history(
    request: Request, name: str, pointer: Literal["latest", "approved"] | None = None
) -> list[PointerMove]:
    """Every move of the resource's pointers, oldest first."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return await store.query_pointer_history(name, pointer)
