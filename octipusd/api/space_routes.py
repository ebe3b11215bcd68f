"""API routes of shared spaces (FACTS.md §5): create, list, show, members, archive.

Routes (under ``/v1``)::

    POST /spaces                      GET /spaces            GET /spaces/{id_or_name}
    PUT  /spaces/{id}/members/{user}  DELETE /spaces/{id}/members/{user}
    POST /spaces/{id}/archive

Roles are stored in the database and read on every turn (:mod:`octipusd.policy.spaces`).
"""

from __future__ import annotations

from fastapi import APIRouter

from octipusd.api.common import Services
from octipusd.api.models import API_VERSION, MemberSet, SpaceCreate, SpaceOut
from octipusd.store.aio import in_thread
from octipusd.store.records import Space

__all__ = ["space_router"]


def _space_out(space: Space) -> SpaceOut:
    return SpaceOut(
        id=space.id,
        name=space.name,
        created_by=space.created_by,
        created_at=space.created_at,
        archived_at=space.archived_at,
        members={user: role.value for user, role in space.members.items()},
    )


def space_router(services: Services) -> APIRouter:
    """Routes for spaces over ``services``."""
    router = APIRouter(prefix=f"/{API_VERSION}")
    store = services.store

    @router.post("/spaces", status_code=201)
    async def create_space(body: SpaceCreate) -> SpaceOut:
        return _space_out(await in_thread(store.create_space, name=body.name, created_by=services.user))

    @router.get("/spaces")
    async def list_spaces() -> list[SpaceOut]:
        return [_space_out(s) for s in await in_thread(store.list_spaces)]

    @router.get("/spaces/{id_or_name}")
    async def get_space(id_or_name: str) -> SpaceOut:
        return _space_out(await in_thread(store.get_space, id_or_name))

    @router.put("/spaces/{id_or_name}/members/{user}")
    async def set_member(id_or_name: str, user: str, body: MemberSet) -> SpaceOut:
        return _space_out(await in_thread(store.set_space_member, id_or_name, user, body.role))

    @router.delete("/spaces/{id_or_name}/members/{user}")
    async def remove_member(id_or_name: str, user: str) -> SpaceOut:
        return _space_out(await in_thread(store.remove_space_member, id_or_name, user))

    @router.post("/spaces/{id_or_name}/archive")
    async def archive_space(id_or_name: str) -> SpaceOut:
        return _space_out(await in_thread(store.archive_space, id_or_name))

    return router
