"""The schedules page: ``/schedules`` (the user's schedules, their next slot and last firing, with
pause, resume and remove) and its fragment ``/fragments/schedules``, re-fetched after each control.

The controls call the API (``POST /v1/schedules/{id}/pause`` ...) through ``app.js``'s ``data-api``
buttons. Everything comes from the schedules' service's documents, the ones the API answers; Jinja2
autoescapes them (a prompt is never markup).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from octipusd.api.common import Services
from octipusd.errors import PipelinesUnavailableError
from octipusd.schedules.service import ScheduleService
from octipusd.web.pages import PageRoute, render

__all__ = ["schedule_pages_router"]


def _service(services: Services) -> ScheduleService:
    if services.schedules is None:
        raise PipelinesUnavailableError("this daemon has no schedules' service")
    return services.schedules


def schedule_pages_router(services: Services) -> APIRouter:
    """The schedules page over ``services`` (not in the OpenAPI schema)."""
    router = APIRouter(include_in_schema=False, route_class=PageRoute)

    @router.get("/schedules", response_class=HTMLResponse)
    async def schedules_page(request: Request) -> HTMLResponse:
        found = await _service(services).list_schedules(services.user)
        return render(request, "schedules.html", schedules=found)

    @router.get("/fragments/schedules", response_class=HTMLResponse)
    async def schedules_fragment(request: Request) -> HTMLResponse:
        found = await _service(services).list_schedules(services.user)
        return render(request, "fragments/schedules.html", schedules=found)

    return router
