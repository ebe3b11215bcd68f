"""API routes of schedules (issue 28 item 8): cron schedules of unattended turns and pipeline runs.

Routes (under ``/v1``), each a thin call of the schedules' service
(:class:`~octipusd.schedules.service.ScheduleService`) as the daemon's user::

    GET    /schedules               the user's schedules, each with its latest firing
    POST   /schedules               add one (201: its document)
    GET    /schedules/{id}          one schedule with its latest firings
    POST   /schedules/{id}/pause    pause it
    POST   /schedules/{id}/resume   resume it from its next slot
    DELETE /schedules/{id}          remove it

Errors: a bad field is a 400 naming it (a bad cron expression, both or neither of ``session_id`` and
``workspace`` or of ``prompt`` and ``pipeline``, a session in a shared space...); an unknown schedule
or session a 404; a daemon without the schedules' service a 503.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import Field

from octipusd.api.common import Services
from octipusd.api.health_models import ApiModel
from octipusd.api.limits import API_LIMITS
from octipusd.api.models import API_VERSION
from octipusd.errors import PipelinesUnavailableError
from octipusd.schedules.service import ScheduleLimits, ScheduleRequest, ScheduleService

__all__ = ["ScheduleCreate", "schedule_router"]

_Name = Annotated[str, Field(min_length=1, max_length=API_LIMITS.max_name_chars)]


class ScheduleCreate(ApiModel):
    """``POST /v1/schedules``: at each slot of ``cron`` (5 fields, or 6 with seconds first; UTC), run
    ``prompt`` as an unattended turn or the pipeline template ``pipeline`` (with ``params``), in the
    session ``session_id`` or in a new session of ``workspace`` per firing: exactly one of each pair."""

    cron: str = Field(min_length=1, max_length=200)
    session_id: _Name | None = None
    workspace: str | None = Field(default=None, min_length=1, max_length=API_LIMITS.max_path_chars)
    prompt: str | None = Field(default=None, min_length=1, max_length=ScheduleLimits().prompt_chars)
    pipeline: _Name | None = None
    params: dict[str, Any] = Field(default_factory=dict)


def _schedules(services: Services) -> ScheduleService:
    if services.schedules is None:
        raise PipelinesUnavailableError("this daemon has no schedules' service")
    return services.schedules


def schedule_router(services: Services) -> APIRouter:
    """Routes of schedules over ``services`` (see the module)."""
    router = APIRouter(prefix=f"/{API_VERSION}/schedules")
    user = services.user

    @router.get("")
    async def list_schedules() -> list[dict[str, Any]]:
        return await _schedules(services).list_schedules(user)

    @router.post("", status_code=201)
    async def add_schedule(body: ScheduleCreate) -> dict[str, Any]:
        request = ScheduleRequest(
            cron=body.cron,
            session_id=body.session_id,
            workspace=body.workspace,
            prompt=body.prompt,
            pipeline=body.pipeline,
            params=body.params,
        )
        return await _schedules(services).add(request, user)

    @router.get("/{schedule_id}")
    async def show_schedule(schedule_id: str) -> dict[str, Any]:
        return await _schedules(services).show(schedule_id, user)

    @router.post("/{schedule_id}/pause")
    async def pause_schedule(schedule_id: str) -> dict[str, Any]:
        return await _schedules(services).pause(schedule_id, user)

    @router.post("/{schedule_id}/resume")
    async def resume_schedule(schedule_id: str) -> dict[str, Any]:
        return await _schedules(services).resume(schedule_id, user)

    @router.delete("/{schedule_id}")
    async def remove_schedule(schedule_id: str) -> dict[str, Any]:
        return await _schedules(services).remove(schedule_id, user)

    return router
