"""API routes of monitors (FACTS.md §7), each a thin call of the monitors' service as the daemon's user::

    GET  /monitors?activeOnly=       the user's monitors, newest first
    POST /monitors/{id}/pause        pause an armed monitor (its deadline does not move)
    POST /monitors/{id}/resume       arm a paused monitor again
    POST /monitors/{id}/cancel       cancel a monitor that has not been delivered

Monitors are created by an agent's root run (``monitor__create``: the monitor wakes its session).
Errors: an unknown monitor is a 404, a move its status does not allow a 409, a daemon without the
monitors' service a 503.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from octipusd.api.common import Services
from octipusd.api.models import API_VERSION
from octipusd.errors import MonitorsUnavailableError
from octipusd.monitors.service import MonitorService
from octipusd.toolkit import PipelineCaller

__all__ = ["monitor_router"]


def _monitors(services: Services) -> MonitorService:
    if services.monitors is None:
        raise MonitorsUnavailableError("this daemon has no monitors' service")
    return services.monitors


def monitor_router(services: Services) -> APIRouter:
    """Routes of monitors over ``services`` (see the module)."""
    router = APIRouter(prefix=f"/{API_VERSION}/monitors")
    person = PipelineCaller(user=services.user)

    @router.get("")
    async def list_monitors(activeOnly: bool = False) -> list[dict[str, Any]]:
        return await _monitors(services).list(person, active_only=activeOnly)

    @router.post("/{monitor_id}/pause")
    async def pause_monitor(monitor_id: str) -> dict[str, Any]:
        return await _monitors(services).pause(monitor_id, person)

    @router.post("/{monitor_id}/resume")
    async def resume_monitor(monitor_id: str) -> dict[str, Any]:
        return await _monitors(services).resume(monitor_id, person)

    @router.post("/{monitor_id}/cancel")
    async def cancel_monitor(monitor_id: str) -> dict[str, Any]:
        return await _monitors(services).cancel(monitor_id, person)

    return router
