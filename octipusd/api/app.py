"""The HTTP surface: a versioned JSON API (FastAPI) on the daemon's Unix socket.

Routes (all under ``/v1``)::

    GET  /health                     daemon, database, per-adapter executable resolution
    POST /sessions                   create a session          GET /sessions[/{id}]
    POST /sessions/{id}/turns        post a prompt (202: the run starts in the background)
    GET  /runs[?session_id=&status=] GET /runs/{id}             POST /runs/{id}/stop
    GET  /runs/{id}/events?after=N   stored events as JSON
    GET  /runs/{id}/stream?after=N   server-sent events, live until the run ends
    GET  /approvals[?status=&run_id=]  GET /approvals/{id}       POST /approvals/{id}

Errors are ``{"code": ..., "message": ...}`` with the status of the
:class:`~octipusd.errors.OctipusError` subclass. The app holds no state of its own: it
calls the :class:`Services` it is given.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel

from octipusd import __version__
from octipusd.api.models import (
    API_VERSION,
    AdapterHealth,
    ApprovalAnswer,
    ApprovalOut,
    EventOut,
    Health,
    RunOut,
    RunStop,
    SessionCreate,
    SessionOut,
    TurnCreate,
)
from octipusd.errors import InvalidRequestError, OctipusError
from octipusd.policy.approvals import ApprovalBroker
from octipusd.runner.executables import Resolution
from octipusd.runtime.events import EventHub
from octipusd.runtime.runs import RunManager
from octipusd.store.aio import in_thread
from octipusd.store.records import ApprovalStatus, RunStatus
from octipusd.store.repository import Store

log = logging.getLogger("octipusd.api")
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Services:
    """What the API calls; built by the composition root (``octipusd.app``)."""

    store: Store
    runs: RunManager
    hub: EventHub
    broker: ApprovalBroker
    resolutions: dict[str, Resolution]


def _dump(record: Any) -> dict[str, Any]:
    data = asdict(record)
    for key, value in data.items():
        if hasattr(value, "value") and isinstance(getattr(value, "value", None), str):
            data[key] = value.value
    return data


def create_app(services: Services) -> FastAPI:
    """Build the FastAPI application over ``services``."""
    app = FastAPI(title="octipusd", version=__version__, docs_url=None, redoc_url=None)
    store, runs, hub, broker = services.store, services.runs, services.hub, services.broker

    @app.exception_handler(OctipusError)
    async def _octipus_error(request: Request, exc: OctipusError) -> JSONResponse:
        return JSONResponse(status_code=exc.http_status, content=exc.to_dict())

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse(
            status_code=500,
            content={"code": "internal_error", "message": f"internal error: {exc!r}; see the octipusd log"},
        )

    @app.get(f"/{API_VERSION}/health")
    async def health() -> Health:
        return Health(
            status="ok",
            api_version=API_VERSION,
            daemon_version=__version__,
            pid=os.getpid(),
            database=store.url_for_display,
            live_runs=len(runs.live_runs()),
            adapters=[
                AdapterHealth(
                    adapter=r.adapter,
                    binary=r.setting,
                    path=r.path,
                    version=r.version,
                    searched_path=r.searched_path,
                    error=r.error,
                )
                for r in services.resolutions.values()
            ],
        )

    @app.post(f"/{API_VERSION}/sessions", status_code=201)
    async def create_session(body: SessionCreate) -> SessionOut:
        workspace = anyio.Path(body.workspace)
        if not workspace.is_absolute() or not await workspace.is_dir():
            raise InvalidRequestError(
                f"workspace {body.workspace!r} is not an existing absolute directory; create it or pass another"
            )
        if body.adapter not in runs.adapters:
            raise InvalidRequestError(
                f"unknown adapter {body.adapter!r}; installed adapters: {', '.join(sorted(runs.adapters))}"
            )
        session = await in_thread(
            store.create_session,
            workspace=str(await workspace.resolve()),
            adapter=body.adapter,
            title=body.title,
            model=body.model,
            permission_mode=body.permission_mode,
            attended=body.attended,
        )
        return _out(SessionOut, session)

    @app.get(f"/{API_VERSION}/sessions")
    async def list_sessions(limit: int = 100) -> list[SessionOut]:
        return [_out(SessionOut, s) for s in await in_thread(store.list_sessions, limit=limit)]

    @app.get(f"/{API_VERSION}/sessions/{{session_id}}")
    async def get_session(session_id: str) -> SessionOut:
        return _out(SessionOut, await in_thread(store.get_session, session_id))

    @app.post(f"/{API_VERSION}/sessions/{{session_id}}/turns", status_code=202)
    async def post_turn(session_id: str, body: TurnCreate) -> RunOut:
        return _run_out(await runs.post_turn(session_id, body.prompt))

    @app.get(f"/{API_VERSION}/runs")
    async def list_runs(
        session_id: str | None = None, status: str | None = None, limit: int = 100
    ) -> list[RunOut]:
        statuses = None
        if status is not None:
            try:
                statuses = [RunStatus(s) for s in status.split(",")]
            except ValueError:
                raise InvalidRequestError(
                    f"unknown status in {status!r}; accepted: {', '.join(s.value for s in RunStatus)}"
                ) from None
        found = await in_thread(store.list_runs, session_id=session_id, statuses=statuses, limit=limit)
        return [_run_out(r) for r in found]

    @app.get(f"/{API_VERSION}/runs/{{run_id}}")
    async def get_run(run_id: str) -> RunOut:
        return _run_out(await in_thread(store.get_run, run_id))

    @app.post(f"/{API_VERSION}/runs/{{run_id}}/stop")
    async def stop_run(run_id: str, body: RunStop | None = None) -> RunOut:
        return _run_out(await runs.stop(run_id, (body or RunStop()).reason))

    @app.get(f"/{API_VERSION}/runs/{{run_id}}/events")
    async def list_events(run_id: str, after: int = 0, limit: int = 1000) -> list[EventOut]:
        await in_thread(store.get_run, run_id)
        events = await in_thread(store.list_events, run_id, after_seq=after, limit=limit)
        return [_out(EventOut, e) for e in events]

    @app.get(f"/{API_VERSION}/runs/{{run_id}}/stream", response_class=EventSourceResponse)
    async def stream_run(run_id: str, request: Request, after: int = 0) -> AsyncIterator[ServerSentEvent]:
        await in_thread(store.get_run, run_id)  # 404 before the stream starts
        last_id = request.headers.get("last-event-id")
        start = int(last_id) if last_id and last_id.isdigit() else after
        async for event in hub.follow(run_id, after_seq=start):
            yield ServerSentEvent(
                id=str(event.seq),
                event=event.kind,
                data=_out(EventOut, event).model_dump(mode="json"),
            )

    @app.get(f"/{API_VERSION}/approvals")
    async def list_approvals(status: str | None = "pending", run_id: str | None = None) -> list[ApprovalOut]:
        wanted = None
        if status and status != "all":
            try:
                wanted = ApprovalStatus(status)
            except ValueError:
                raise InvalidRequestError(
                    f"unknown status {status!r}; accepted: all, {', '.join(s.value for s in ApprovalStatus)}"
                ) from None
        found = await in_thread(store.list_approvals, status=wanted, run_id=run_id)
        return [_out(ApprovalOut, a) for a in found]

    @app.get(f"/{API_VERSION}/approvals/{{approval_id}}")
    async def get_approval(approval_id: str) -> ApprovalOut:
        return _out(ApprovalOut, await in_thread(store.get_approval, approval_id))

    @app.post(f"/{API_VERSION}/approvals/{{approval_id}}")
    async def answer_approval(approval_id: str, body: ApprovalAnswer, request: Request) -> ApprovalOut:
        client = request.headers.get("x-octipus-client", "api")
        approval = await broker.answer(
            approval_id,
            approve=body.decision == "approve",
            decided_by=f"{runs.user} via {client}",
            reason=body.reason,
        )
        return _out(ApprovalOut, approval)

    return app


def _out(model: type[M], record: Any) -> M:
    """Build an API model from a store record, taking the fields the model declares."""
    data = _dump(record)
    return model(**{k: v for k, v in data.items() if k in model.model_fields})


def _run_out(run: Any) -> RunOut:
    return _out(RunOut, run)
