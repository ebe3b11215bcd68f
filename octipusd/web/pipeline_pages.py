"""The pipeline pages: ``/pipelines`` (the user's pipelines) and ``/pipelines/{id}`` (the graph with its
node states, the items by stages, the attempts with links to their runs, the incomplete attempt, stop
and resume), plus the pipeline's live fragment.

The page follows the pipeline's own stream (``GET /v1/pipelines/{id}/stream``, server-sent events of
its history): ``app.js`` opens one ``EventSource`` per pipeline shown (elements with
``data-live-pipeline``) and re-fetches ``/fragments/pipelines/{id}`` when an event arrives. Everything
comes from the pipelines' service's status document, the one the API and the tools answer; Jinja2
autoescapes it (an agent's text is never markup).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from octipusd.api.common import Services
from octipusd.errors import PipelinesUnavailableError
from octipusd.pipelines.service import PipelineService
from octipusd.store.pipeline_records import PipelineStatus
from octipusd.toolkit.pipelines import PipelineCaller
from octipusd.web.pages import PageRoute, render

__all__ = ["pipeline_pages_router"]

#: Pipeline statuses a person may resume from (the walker refuses the others with a 409).
RESUMABLE = frozenset(s.value for s in PipelineStatus if not s.active and s is not PipelineStatus.COMPLETED)
#: Pipeline statuses a person may stop.
STOPPABLE = frozenset(s.value for s in PipelineStatus if s.active)


def _service(services: Services) -> PipelineService:
    if services.pipelines is None:
        raise PipelinesUnavailableError("this daemon has no pipelines' service")
    return services.pipelines


async def _pipeline_context(services: Services, pipeline_id: str) -> dict[str, Any]:
    """The status document (history included) and what the controls offer.

    Raises:
        NotFoundError: no such pipeline.
    """
    doc = await _service(services).status(pipeline_id, PipelineCaller(user=services.user))
    return {
        "p": doc,
        "can_stop": doc["status"] in STOPPABLE,
        "can_resume": doc["status"] in RESUMABLE,
    }


def pipeline_pages_router(services: Services) -> APIRouter:
    """The pipeline pages over ``services`` (not in the OpenAPI schema)."""
    router = APIRouter(include_in_schema=False, route_class=PageRoute)

    @router.get("/pipelines", response_class=HTMLResponse)
    async def pipelines_page(request: Request) -> HTMLResponse:
        found = await _service(services).list(PipelineCaller(user=services.user))
        return render(request, "pipelines.html", pipelines=found)

    @router.get("/pipelines/{pipeline_id}", response_class=HTMLResponse)
    async def pipeline_page(request: Request, pipeline_id: str) -> HTMLResponse:
        return render(request, "pipeline.html", **await _pipeline_context(services, pipeline_id))

    @router.get("/fragments/pipelines/{pipeline_id}", response_class=HTMLResponse)
    async def pipeline_fragment(request: Request, pipeline_id: str) -> HTMLResponse:
        return render(request, "fragments/pipeline.html", **await _pipeline_context(services, pipeline_id))

    return router
