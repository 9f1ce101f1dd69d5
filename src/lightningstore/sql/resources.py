"""SqlResources: SqlStore's resource versions, resource sets and pointers."""

from __future__ import annotations

from typing import Any, Literal

import sqlalchemy as sa
from pydantic import TypeAdapter, ValidationError

from lightningstore.data.resource import Pointer, PointerMove, Resource, ResourceSet, ResourceVersion
from lightningstore.data.store_request import PointerMoveRequest, ResourcesRequest, VersionRequest
from lightningstore.errors import ConflictError, InvalidInputError, NotFoundError
from lightningstore.finite import refuse_non_finite
from lightningstore.sql import tables
from lightningstore.sql.database import new_id
from lightningstore.sql.part import SqlPart
from lightningstore.sql.rows import pointer_move_from_row, version_from_row

_resource_adapter: TypeAdapter[Any] = TypeAdapter(Resource)


def _pointer(value: str) -> Pointer:
    try:
        return Pointer(value)
    except ValueError as exc:
        raise InvalidInputError("pointer", f"must be 'latest' or 'approved', got {value!r}") from exc


class SqlResources(SqlPart):
    async def _add_resource_version(self, request: VersionRequest) -> ResourceVersion:
        return await self._db.write(lambda conn: self._add_version(conn, request))

    def _add_version(self, conn: sa.Connection, request: VersionRequest) -> ResourceVersion:
        name, resource, parent_id, version_id = (
            request.name,
            request.resource,
            request.parent_id,
            request.version_id,
        )
        created_by, metadata = request.created_by, request.metadata
        if not name or len(name) > 200:
            raise InvalidInputError("name", f"resource name must be 1..200 characters, got {name!r}")
        given = resource.model_dump() if hasattr(resource, "model_dump") else resource
        refuse_non_finite(given, "resource")
        refuse_non_finite(metadata, "metadata")
        try:
            resource = _resource_adapter.validate_python(given)
        except ValidationError as exc:
            raise InvalidInputError("resource", str(exc)) from exc
        stored = self._get_version(conn, version_id) if version_id is not None else None
        if stored is not None:
            if stored.name != name or stored.resource != resource or stored.parent_id != parent_id:
                raise ConflictError(f"resource version {version_id!r} already exists with other content")
            return stored
        if parent_id is not None:
            self._version_of(conn, name, parent_id, "parent_id")
        version = ResourceVersion(
            version_id=version_id or new_id("rv"),
            name=name,
            resource=resource,
            parent_id=parent_id,
            created_by=created_by,
            artifact=request.artifact,
            metadata=metadata or {},
            create_time=self._db.now(),
        )
        conn.execute(sa.insert(tables.resource_versions), [version.model_dump(mode="json")])
        self._move(conn, name, Pointer.LATEST, version.version_id, created_by, "published")
        if self._pointer_version_id(conn, name, Pointer.APPROVED) is None:
            self._move(conn, name, Pointer.APPROVED, version.version_id, created_by, "initial baseline")
        return version

    async def _add_resources(self, request: ResourcesRequest) -> ResourceSet:
        if not request.resources:
            raise InvalidInputError("resources", "must name at least one resource")
        parents, created_by = request.parents or {}, request.created_by

        def _tx(conn: sa.Connection) -> Any:
            versions = {
                name: self._add_version(
                    conn, VersionRequest(name, res, parents.get(name), created_by, None, None, None)
                )
                for name, res in request.resources.items()
            }
            return self._add_set(conn, versions)

        return await self._db.write(_tx)

    async def add_resource_set(self, versions: dict[str, str]) -> ResourceSet:
        if not versions:
            raise InvalidInputError("versions", "must name at least one resource version")

        def _tx(conn: sa.Connection) -> Any:
            resolved: dict[str, ResourceVersion] = {}
            for name, version_id in versions.items():
                resolved[name] = self._version_of(conn, name, version_id, "versions")
            return self._add_set(conn, resolved)

        return await self._db.write(_tx)

    def _add_set(self, conn: sa.Connection, versions: dict[str, ResourceVersion]) -> ResourceSet:
        rs = ResourceSet(resources_id=new_id("rs"), versions=versions, create_time=self._db.now())
        conn.execute(
            sa.insert(tables.resource_sets),
            [
                {
                    "resources_id": rs.resources_id,
                    "versions": {n: v.version_id for n, v in versions.items()},
                    "create_time": rs.create_time,
                }
            ],
        )
        return rs

    def _load_set(self, conn: sa.Connection, row: sa.Row[Any] | None) -> ResourceSet | None:
        if row is None:
            return None
        versions: dict[str, ResourceVersion] = {}
        for name, version_id in row.versions.items():
            version = self._get_version(conn, version_id)
            if version is not None:
                versions[name] = version
        return ResourceSet(resources_id=row.resources_id, versions=versions, create_time=row.create_time)

    async def get_resources_by_id(self, resources_id: str) -> ResourceSet | None:
        def _tx(conn: sa.Connection) -> Any:
            row = (
                conn.execute(
                    sa.select(tables.resource_sets).where(tables.resource_sets.c.resources_id == resources_id)
                )
            ).first()
            return self._load_set(conn, row)

        return await self._db.read(_tx)

    async def get_latest_resources(self) -> ResourceSet | None:
        def _tx(conn: sa.Connection) -> Any:
            row = (
                conn.execute(
                    sa.select(tables.resource_sets).order_by(tables.resource_sets.c.seq.desc()).limit(1)
                )
            ).first()
            return self._load_set(conn, row)

        return await self._db.read(_tx)

    def _get_version(self, conn: sa.Connection, version_id: str) -> ResourceVersion | None:
        row = (
            conn.execute(
                sa.select(tables.resource_versions).where(tables.resource_versions.c.version_id == version_id)
            )
        ).first()
        return version_from_row(row._mapping) if row is not None else None

    def _version_of(self, conn: sa.Connection, name: str, version_id: str, field: str) -> ResourceVersion:
        """The stored version `version_id` of resource `name`: NotFoundError if there is none,
        InvalidInputError naming `field` if it is another resource's."""
        version = self._get_version(conn, version_id)
        if version is None:
            raise NotFoundError("resource version", version_id)
        if version.name != name:
            raise InvalidInputError(field, f"version {version_id!r} is of {version.name!r}, not {name!r}")
        return version

    async def get_resource_version(self, version_id: str) -> ResourceVersion | None:
        def _tx(conn: sa.Connection) -> Any:
            return self._get_version(conn, version_id)

        return await self._db.read(_tx, small=True)

    def _pointer_version_id(self, conn: sa.Connection, name: str, pointer: Pointer) -> str | None:
        query = sa.select(tables.resource_pointers.c.version_id).where(
            tables.resource_pointers.c.name == name, tables.resource_pointers.c.pointer == pointer.value
        )
        return (conn.execute(query)).scalar_one_or_none()

    async def get_pointer(self, name: str, pointer: Literal["latest", "approved"]) -> ResourceVersion | None:
        which = _pointer(pointer)

        def _tx(conn: sa.Connection) -> Any:
            version_id = self._pointer_version_id(conn, name, which)
            return self._get_version(conn, version_id) if version_id else None

        return await self._db.read(_tx, small=True)

    async def list_resource_versions(self, name: str | None = None) -> list[ResourceVersion]:
        query = sa.select(tables.resource_versions).order_by(tables.resource_versions.c.seq)
        if name is not None:
            query = query.where(tables.resource_versions.c.name == name)

        def _tx(conn: sa.Connection) -> Any:
            return [version_from_row(r._mapping) for r in conn.execute(query)]

        return await self._db.read(_tx)

    async def _move_pointer(self, move: PointerMoveRequest) -> PointerMove:
        name, version_id, actor, reason = move.name, move.version_id, move.actor, move.reason
        which = _pointer(move.pointer)
        if not actor:
            raise InvalidInputError("actor", "must name who moves the pointer")

        def _tx(conn: sa.Connection) -> Any:
            self._version_of(conn, name, version_id, "version_id")
            return self._move(conn, name, which, version_id, actor, reason)

        return await self._db.write(_tx)

    def _move(
        self, conn: sa.Connection, name: str, pointer: Pointer, version_id: str, actor: str, reason: str
    ) -> PointerMove:
        previous = self._pointer_version_id(conn, name, pointer)
        if previous is None:
            conn.execute(
                sa.insert(tables.resource_pointers),
                [{"name": name, "pointer": pointer.value, "version_id": version_id}],
            )
        else:
            conn.execute(
                sa.update(tables.resource_pointers)
                .where(
                    tables.resource_pointers.c.name == name,
                    tables.resource_pointers.c.pointer == pointer.value,
                )
                .values(version_id=version_id)
            )
        move = PointerMove(
            name=name,
            pointer=pointer,
            version_id=version_id,
            previous_version_id=previous,
            actor=actor,
            reason=reason,
            time=self._db.now(),
        )
        conn.execute(sa.insert(tables.pointer_history), [move.model_dump(mode="json")])
        return move

    async def query_pointer_history(
        self, name: str, pointer: Literal["latest", "approved"] | None = None
    ) -> list[PointerMove]:
        query = sa.select(tables.pointer_history).where(tables.pointer_history.c.name == name)
        if pointer is not None:
            query = query.where(tables.pointer_history.c.pointer == _pointer(pointer).value)

        def _tx(conn: sa.Connection) -> Any:
            return [
                pointer_move_from_row(r._mapping)
                for r in conn.execute(query.order_by(tables.pointer_history.c.seq))
            ]

        return await self._db.read(_tx)
