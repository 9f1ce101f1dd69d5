"""Resource routes: versions, sets, and the `latest` / `approved` pointers (approved needs approver)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request

from lightningstore.auth.tokens import Permission
from lightningstore.errors import NotFoundError
from lightningstore.resource import Pointer, PointerMove, ResourceSet, ResourceVersion
from lightningstore.server.auth import context
from lightningstore.server.schemas import AddResourcesBody, AddVersionBody, MovePointerBody, ResourceSetBody

router = APIRouter(prefix="/v1", tags=["resources"])


@router.post("/resource-versions")
async def add_resource_version(request: Request, body: AddVersionBody) -> ResourceVersion:
    """Publish a version and move `latest`; idempotent on `version_id`."""
    store, caller = context(request)
    caller.require(Permission.PUBLISH)
    return await store.add_resource_version(
        body.name,
        body.resource,
        parent_id=body.parent_id,
        created_by=body.created_by,
        artifact=body.artifact,
        metadata=body.metadata,
        version_id=body.version_id,
    )


@router.get("/resource-versions")
async def list_resource_versions(request: Request, name: str | None = None) -> list[ResourceVersion]:
    """Versions (of one name, or all), oldest first."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return await store.list_resource_versions(name)


@router.get("/resource-versions/{version_id:id}")
async def get_resource_version(request: Request, version_id: str) -> ResourceVersion:
    """One version (404 if unknown)."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    version = await store.get_resource_version(version_id)
    if version is None:
        raise NotFoundError("resource version", version_id)
    return version


@router.post("/resources")
async def add_resources(request: Request, body: AddResourcesBody) -> ResourceSet:
    """Publish one version per name and bind them in a new set."""
    store, caller = context(request)
    caller.require(Permission.PUBLISH)
    return await store.add_resources(body.resources, created_by=body.created_by, parents=body.parents)


@router.post("/resource-sets")
async def add_resource_set(request: Request, body: ResourceSetBody) -> ResourceSet:
    """Bind existing versions into a new set."""
    store, caller = context(request)
    caller.require(Permission.PUBLISH)
    return await store.add_resource_set(body.versions)


@router.get("/resource-sets/latest")
async def get_latest_resources(request: Request) -> ResourceSet | None:
    """The most recently created set, or null."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return await store.get_latest_resources()


@router.get("/resource-sets/{resources_id:id}")
async def get_resources(request: Request, resources_id: str) -> ResourceSet:
    """One set (404 if unknown)."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    found = await store.get_resources_by_id(resources_id)
    if found is None:
        raise NotFoundError("resource set", resources_id)
    return found


@router.get("/pointers")
async def get_pointer(
    request: Request, name: str, pointer: Literal["latest", "approved"]
) -> ResourceVersion | None:
    """The version a resource's pointer names, or null."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return await store.get_pointer(name, pointer)


@router.put("/pointers")
async def move_pointer(request: Request, body: MovePointerBody) -> PointerMove:
    """Move `latest` (publish rights) or `approved` (approver only)."""
    store, caller = context(request)
    caller.require(Permission.APPROVE if body.pointer == Pointer.APPROVED else Permission.PUBLISH)
    return await store.move_pointer(
        body.name, body.pointer.value, body.version_id, actor=body.actor, reason=body.reason
    )


@router.get("/pointer-history")
async def query_pointer_history(
    request: Request, name: str, pointer: Literal["latest", "approved"] | None = None
) -> list[PointerMove]:
    """Every move of the resource's pointers, oldest first."""
    store, caller = context(request)
    caller.require(Permission.READ_RUNTIME)
    return await store.query_pointer_history(name, pointer)
