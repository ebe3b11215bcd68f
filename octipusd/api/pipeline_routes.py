"""API routes of pipelines and their templates (seed 003 "Executable paths and pipeline recovery").

Routes (under ``/v1``), each a thin call of the pipelines' service (:class:`PipelineService`) or of
the templates' (:class:`~octipusd.pipelines.catalog.TemplateCatalog`) as the daemon's user::

    GET  /pipelines                          the user's pipelines, newest first
    POST /pipelines                          run a template (201: the new pipeline's summary)
    GET  /pipelines/templates                the templates the user sees
    POST /pipelines/templates                import a template (201)
    GET  /pipelines/templates/{name}         one template (by id or exact name) with its document
    GET  /pipelines/templates/{name}/export  its export envelope
    GET  /pipelines/{id}?includeHistory=     the status document
    GET  /pipelines/{id}/stream?after=       its history as server-sent events, live while it works
    POST /pipelines/{id}/stop                stop it (resumable ``stopped``)
    POST /pipelines/{id}/resume              resume it ({fromStage, skipItems, evidence}): 202 "resuming"
                                             (with pendingApproval: its replay review awaits a person)
    POST /pipelines/{id}/items               queue item edits ({skip, add, order, evidence}) for the next boundary

Errors: a bad body is a 400 naming the field; an unknown pipeline or template a 404 naming it; a
resume of a running pipeline, or a second resume (one awaiting its replay review: "already
awaiting"), a 409; a daemon without the pipelines' walker a 503.
The templates' routes exist only when the daemon has the templates' service (``Services.templates``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final

import anyio
from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from octipusd.api.common import Services
from octipusd.api.limits import After, LastEventId
from octipusd.api.models import API_VERSION
from octipusd.api.pipeline_models import (
    PipelineCreate,
    PipelineItemIn,
    PipelineItemsUpdate,
    PipelineResume,
    TemplateImport,
)
from octipusd.api.sse import KEEPALIVE_FRAME
from octipusd.errors import InvalidRequestError, PipelinesUnavailableError
from octipusd.pipelines.catalog import TemplateCatalog
from octipusd.pipelines.service import PipelineService
from octipusd.store.pipeline_records import PipelineEvent
from octipusd.toolkit.pipelines import CreateRequest, ItemChanges, ItemDraft, PipelineCaller, ResumeRequest

__all__ = ["PIPELINE_FRAME_SCHEMA", "PipelineStreamLimits", "encode_pipeline_events", "pipeline_router"]


@dataclass(frozen=True)
class PipelineStreamLimits:
    """Bounds of one pipeline stream.

    Attributes:
        poll_s: Seconds between two reads of the pipeline's history (the stream's latency).
        keepalive_s: Seconds without an event after which a keep-alive comment is written.
        batch_events: History events one read takes at most.
    """

    poll_s: float = 1.0
    keepalive_s: float = 15.0
    batch_events: int = 500


STREAM_LIMITS: Final = PipelineStreamLimits()

#: The OpenAPI schema of one frame of a pipeline's stream.
PIPELINE_FRAME_SCHEMA: Final = {
    "type": "object",
    "required": ["id", "data"],
    "properties": {
        "id": {"type": "string", "description": "the history event's seq (resume with Last-Event-ID)"},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "description": "the event: {seq, kind, itemId, attemptId, data, at}",
        },
    },
}


def encode_pipeline_events(events: list[PipelineEvent]) -> bytes:
    """The SSE frames of ``events`` as one write: ``id`` the event's ``seq``, ``data`` the event as the
    status document's history entries (its ``kind`` inside: the frames are unnamed, so a browser's
    ``onmessage`` hears every one)."""
    frames = []
    for event in events:
        data = json.dumps(
            {
                "seq": event.seq,
                "kind": event.kind,
                "itemId": event.item_id,
                "attemptId": event.attempt_id,
                "data": event.data,
                "at": event.created_at.isoformat() if event.created_at else None,
            },
            ensure_ascii=False,
            separators=(",", ":"),
            default=str,
        )
        frames.append(f"id: {event.seq}\ndata: {data}\n\n")
    return "".join(frames).encode()


def _drafts(items: list[PipelineItemIn]) -> tuple[ItemDraft, ...]:
    return tuple(ItemDraft(i.title, i.detail, i.acceptance) for i in items)


def _pipelines(services: Services) -> PipelineService:
    if services.pipelines is None:
        raise PipelinesUnavailableError("this daemon has no pipelines' service")
    return services.pipelines


def pipeline_router(services: Services, limits: PipelineStreamLimits = STREAM_LIMITS) -> APIRouter:
    """Routes of pipelines and templates over ``services`` (see the module)."""
    router = APIRouter(prefix=f"/{API_VERSION}/pipelines")
    person = PipelineCaller(user=services.user)

    @router.get("")
    async def list_pipelines() -> list[dict[str, Any]]:
        return await _pipelines(services).list(person)

    @router.post("", status_code=201)
    async def create_pipeline(body: PipelineCreate) -> dict[str, Any]:
        if (body.workspace is None) == (body.session_id is None):
            raise InvalidRequestError("workspace, session_id: give exactly one (where the pipeline works)")
        request = CreateRequest(
            template=body.template,
            params=body.params,
            session_id=body.session_id,
            workspace=body.workspace,
            description=body.description,
            items=_drafts(body.items),
        )
        return await _pipelines(services).create(request, person)

    if services.templates is not None:
        _template_routes(router, services.templates, person)

    @router.get("/{pipeline_id}")
    async def pipeline_status(pipeline_id: str, includeHistory: bool = True) -> dict[str, Any]:
        return await _pipelines(services).status(pipeline_id, person, include_history=includeHistory)

    @router.post("/{pipeline_id}/stop")
    async def stop_pipeline(pipeline_id: str) -> dict[str, Any]:
        return await _pipelines(services).stop(pipeline_id, person)

    @router.post("/{pipeline_id}/resume", status_code=202)
    async def resume_pipeline(pipeline_id: str, body: PipelineResume | None = None) -> dict[str, Any]:
        body = body or PipelineResume()
        request = ResumeRequest(
            from_stage=body.fromStage, skip_items=tuple(body.skipItems), evidence=body.evidence
        )
        return await _pipelines(services).resume(pipeline_id, person, request)

    @router.post("/{pipeline_id}/items")
    async def update_items(pipeline_id: str, body: PipelineItemsUpdate) -> dict[str, Any]:
        if not (body.skip or body.add or body.order):
            raise InvalidRequestError("skip, add, order: give at least one change")
        changes = ItemChanges(
            skip=tuple(body.skip), add=_drafts(body.add), order=tuple(body.order), evidence=body.evidence
        )
        return await _pipelines(services).update_items(pipeline_id, person, changes)

    @router.get(
        "/{pipeline_id}/stream",
        response_class=StreamingResponse,
        responses={
            200: {
                "description": "Server-sent events (unnamed: a browser's onmessage gets each): `id` the "
                "history event's seq, `data` the event with its kind",
                "content": {"text/event-stream": {"schema": PIPELINE_FRAME_SCHEMA}},
            }
        },
    )
    async def stream_pipeline(
        pipeline_id: str, after: After = 0, last_event_id: LastEventId = None
    ) -> StreamingResponse:
        """The pipeline's history as server-sent events, live while a walker works on it (see
        :func:`_follow`); ``Last-Event-ID`` (or ``after``) resumes after that ``seq``. The pipeline
        is found (404), and its owner checked, before the stream starts."""
        pipelines = _pipelines(services)
        await pipelines.owned(pipeline_id, person)
        start = after if last_event_id is None else last_event_id
        return StreamingResponse(
            _follow(services, pipelines, pipeline_id, start, limits),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return router


def _template_routes(router: APIRouter, catalog: TemplateCatalog, person: PipelineCaller) -> None:
    """The templates' routes (registered before ``/{pipeline_id}``, which would take their paths)."""

    @router.get("/templates")
    async def list_templates() -> list[dict[str, Any]]:
        return [t.summary() for t in await catalog.list_templates(person.user)]

    @router.post("/templates", status_code=201)
    async def import_template(body: TemplateImport) -> dict[str, Any]:
        entry = await catalog.import_template(person.user, body.document, name=body.name)
        return entry.to_json()

    @router.get("/templates/{name}")
    async def show_template(name: str) -> dict[str, Any]:
        return (await catalog.show(person.user, name)).to_json()

    @router.get("/templates/{name}/export")
    async def export_template(name: str) -> dict[str, Any]:
        return await catalog.export(person.user, name)


async def _follow(
    services: Services, pipelines: PipelineService, pipeline_id: str, after: int, limits: PipelineStreamLimits
) -> AsyncIterator[bytes]:
    """Poll the pipeline's history every :attr:`PipelineStreamLimits.poll_s` and write what is new (a
    keep-alive after :attr:`PipelineStreamLimits.keepalive_s` of quiet). Ends once the history is
    written and no walker works on the pipeline (not ``planning``, ``running`` or
    ``awaiting_approval``): a browser's ``EventSource`` reconnects by itself with ``Last-Event-ID``,
    so a page follows a later resume too. Ends when the daemon stops."""
    yield KEEPALIVE_FRAME  # at once: the browser's EventSource reports itself open
    quiet = 0.0
    person = PipelineCaller(user=services.user)
    while not services.hub.closed:
        events = await pipelines.events(pipeline_id, after=after, limit=limits.batch_events)
        if events:
            after = events[-1].seq
            quiet = 0.0
            yield encode_pipeline_events(events)
            if len(events) == limits.batch_events:
                continue
        elif not (await pipelines.owned(pipeline_id, person)).status.active:
            # what came between the read above and the status read, its last status change included
            last = await pipelines.events(pipeline_id, after=after, limit=limits.batch_events)
            if last:
                yield encode_pipeline_events(last)
            return
        elif quiet >= limits.keepalive_s:
            quiet = 0.0
            yield KEEPALIVE_FRAME
        await anyio.sleep(limits.poll_s)
        quiet += limits.poll_s
