"""The HTTP surface: a versioned JSON API (FastAPI) on the daemon's Unix socket.

Routes (all under ``/v1``)::

    GET  /openapi.json               the OpenAPI schema of every route below
    GET  /health                     daemon, database, per-adapter executable resolution
    POST /sessions                   create a session          GET /sessions[/{id}]
    POST /sessions/{id}/turns        post a prompt (202: the run starts in the background)
    POST /sessions/{id}/steer        guidance for the live run (into the running turn, or queued)
    POST /sessions/{id}/clear|compact  GET /sessions/{id}/vendor-sessions|messages|checkpoint
                                     (session reuse, compaction, /clear: see session_routes)
    GET  /sessions/{id}/plan         POST /sessions/{id}/plan/feedback[/{feedback_id}/reply]
                                     (the work plan and its feedback: see plan_routes)
    GET  /runs[?session_id=&status=] GET /runs/{id}             POST /runs/{id}/stop
    GET  /runs/{id}/events?after=N   stored events as JSON
    GET  /runs/{id}/stream?after=N   server-sent events, live until the run ends
    GET  /approvals[?status=&run_id=]  GET /approvals/{id}       POST /approvals/{id}
    GET  /rules                      configured, stored rules and active grants
    POST /rules  DELETE /rules/{id}  POST /rules/explain    POST /grants  DELETE /grants/{id}
    POST /spaces  GET /spaces[/{id}]  PUT|DELETE /spaces/{id}/members/{user}
    POST /spaces/{id}/archive
    POST /models                     create a model row        GET /models
    GET|PATCH|DELETE /models/{id_or_name}
    GET  /actions  GET /actions/{id}  POST /actions/{id}/probe|compensate|contain
    POST /actions/review  POST|GET /actions/calls  GET /actions/calls/{id}
    DELETE /sessions/{id}            DELETE /users/{user}/journal   (see action_routes)
    GET  /worktrees  GET /worktrees/{id}/diff  POST /worktrees/{id}/merge|discard
    GET  /runs/{id}/children         (child worktrees and child receipts: see worktree_routes)
    GET  /activity                   server-sent events: which runs have new events (see activity_routes)
    GET  /web                        the page's link with its token (Unix socket only: web_routes)
    POST /notify/test                a test notification to every notify.urls target (notify_routes)
    POST|GET /vault/entries  DELETE /vault/entries/{name}  POST /vault/entries/{name}/allow|revoke
    POST /vault/rotate-key           the vault's administration (Unix socket only: vault_routes)

Errors are ``{"code": ..., "message": ...}`` with the status of the
:class:`~octipusd.errors.OctipusError` subclass (:mod:`~octipusd.api.error_handlers`; the schema,
``GET /v1/openapi.json``, declares them on every route: ``ERROR_RESPONSES``). Under ``/v1/models`` and
``/v1/vault`` a body that fails schema validation is also a 400 ``invalid_request`` naming the field,
never echoing the input (elsewhere FastAPI's
422 ``{"detail": [...]}``). The app holds no state of its own: it calls the
:class:`Services` it is given.

Model rows are validated whenever they are saved (create and update): the adapter must be
installed, the permission mode one of the four, ``binary`` a command name or an absolute
path, ``metadata``/``metadata.cliAgent`` objects with typed known keys, and the additive
flags accepted by the adapter (:func:`check_additive_flags`). Their responses carry the
capabilities the adapter declares (:func:`capabilities_for`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final, ParamSpec, TypeVar

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from octipus_worktrees import printable
from pydantic import BaseModel

from octipusd import __version__
from octipusd.adapter import Adapter, CapabilityRow
from octipusd.api.action_routes import action_router
from octipusd.api.activity_routes import activity_router
from octipusd.api.common import Services, dump, out, via_web
from octipusd.api.disclosure import ErrorBodyGuard
from octipusd.api.error_handlers import install_error_handlers
from octipusd.api.limits import After, LastEventId, Limit, RequestGuard
from octipusd.api.models import (
    API_VERSION,
    ERROR_RESPONSES,
    AdapterHealth,
    Capabilities,
    EventOut,
    Health,
    ModelRowCreate,
    ModelRowOut,
    ModelRowUpdate,
    ReapReportOut,
    RunOut,
    RunStop,
    SessionCreate,
    SessionOut,
    ShellSandboxHealth,
    SteerCreate,
    SteerOut,
    TurnCreate,
    VaultHealth,
    WebHealth,
    WorktreeReaperOut,
)
from octipusd.api.monitor_routes import monitor_router
from octipusd.api.notify_routes import notifier_health, notify_router
from octipusd.api.pipeline_routes import pipeline_router
from octipusd.api.plan_routes import plan_router
from octipusd.api.policy_routes import policy_router
from octipusd.api.schedule_routes import schedule_router
from octipusd.api.session_routes import session_router
from octipusd.api.space_routes import space_router
from octipusd.api.sse import EVENT_FRAME_SCHEMA, encode_batch
from octipusd.api.usage_routes import usage_router
from octipusd.api.vault_routes import vault_router
from octipusd.api.web_routes import web_router
from octipusd.api.worktree_routes import worktree_router
from octipusd.errors import AdapterError, ForbiddenError, InvalidRequestError, NotFoundError
from octipusd.policy.spaces import check_space_model
from octipusd.store.aio import in_thread
from octipusd.store.records import ModelRow, RunStatus
from octipusd.store.validation import (
    check_additive_flags_shape,
    check_binary,
    check_metadata,
    check_model_name,
    check_model_row_name,
    check_permission_mode,
    check_session_options,
)
from octipusd.toolkit import ShellSandbox

log = logging.getLogger("octipusd.api")
M = TypeVar("M", bound=BaseModel)
P = ParamSpec("P")
T = TypeVar("T")


# ----------------------------------------------------------------------------- model rows


def check_additive_flags(adapter: Adapter, flags: Sequence[str]) -> tuple[str, ...]:
    """Check a model row's additive flags with its adapter; return them normalized.

    The adapter decides (:meth:`~octipusd.adapter.Adapter.check_additive_flags`: its refusal names
    the flag and lists the allowed ones; an adapter that declares none refuses every flag).

    Args:
        adapter: The row's installed adapter.
        flags: The flags as given (strings).

    Returns:
        The normalized flags, in order.

    Raises:
        InvalidRequestError: A flag is not allowed or malformed (the adapter's message).
    """
    try:
        return tuple(adapter.check_additive_flags(list(flags)))
    except AdapterError as exc:
        raise InvalidRequestError(exc.message) from None


#: What a column says when the adapter declares no capability row (or is not installed).
NOT_DESCRIBED: Final = "not described by the adapter"


def capabilities_for(
    adapter_name: str, adapter: Adapter | None, cli_agent: Mapping[str, Any]
) -> Capabilities:
    """Return seed 003's "Permissions and limits" row for a model row, as its adapter declares it.

    From :meth:`~octipusd.adapter.Adapter.capabilities` with the row's ``metadata.cliAgent`` (the
    transport may change the row; ``transport`` reports it). An adapter that declares no row, or
    one that is not installed, gives :data:`NOT_DESCRIBED` columns (``source`` ``undeclared``).

    Args:
        adapter_name: The row's adapter registry name.
        adapter: The installed adapter, or None.
        cli_agent: The row's ``metadata.cliAgent``.

    Returns:
        The capabilities.
    """
    raw_transport = cli_agent.get("transport")
    transport = raw_transport if isinstance(raw_transport, str) else None
    row = adapter.capabilities(cli_agent) if adapter is not None else None
    if row is None:
        label = adapter.display_name if adapter is not None else adapter_name
        row = CapabilityRow(label, NOT_DESCRIBED, NOT_DESCRIBED, NOT_DESCRIBED, NOT_DESCRIBED)
        return Capabilities(**dataclasses.asdict(row), transport=transport, source="undeclared")
    return Capabilities(**dataclasses.asdict(row), transport=transport, source="adapter")


def validate_model_row(fields: Mapping[str, Any], adapters: Mapping[str, Adapter]) -> dict[str, Any]:
    """Validate a whole model row before it is saved; return it with normalized flags.

    Args:
        fields: ``name``, ``adapter``, ``binary``, ``model``, ``permission_mode``,
            ``additive_flags`` (list of strings) and ``metadata`` (object).
        adapters: The installed adapters by registry name.

    Returns:
        The same keys, ``additive_flags`` as the adapter normalized them (a tuple).

    Raises:
        InvalidRequestError: The adapter is not installed (the message lists the installed
            ones), or a field is invalid (the message names it and what is accepted).
    """
    adapter_name = fields["adapter"]
    adapter = adapters.get(adapter_name)
    if adapter is None:
        raise InvalidRequestError(
            f"adapter {adapter_name!r} is not installed; installed adapters: {', '.join(sorted(adapters))}"
        )
    checked: dict[str, Any] = {
        "name": check_model_row_name(fields["name"]),
        "adapter": adapter_name,
        "binary": check_binary(fields["binary"]),
        "model": check_model_name(fields["model"]),
        "permission_mode": check_permission_mode(fields["permission_mode"]),
        "metadata": check_metadata(fields["metadata"]),
    }
    flags = check_additive_flags_shape(fields["additive_flags"])
    checked["additive_flags"] = check_additive_flags(adapter, flags)
    transport = checked["metadata"].get("cliAgent", {}).get("transport")
    if transport is not None and transport not in adapter.transports:
        accepted = (
            ", ".join(adapter.transports) if adapter.transports else "none: this vendor runs one way only"
        )
        raise InvalidRequestError(
            f"metadata.cliAgent.transport {transport!r} is not a transport of {adapter_name}; accepted: {accepted}"
        )
    return checked


def create_app(services: Services) -> FastAPI:
    """Build the FastAPI application over ``services``."""
    app = FastAPI(
        title="octipusd",
        version=__version__,
        openapi_url=f"/{API_VERSION}/openapi.json",
        docs_url=None,
        redoc_url=None,
        responses=ERROR_RESPONSES,
    )
    app.add_middleware(RequestGuard)
    app.add_middleware(ErrorBodyGuard, private=services.private)  # outermost: it sees every refusal
    store, runs, hub = services.store, services.runs, services.hub

    install_error_handlers(app, services.private)

    app.include_router(policy_router(services))
    app.include_router(space_router(services))
    app.include_router(action_router(services))
    app.include_router(session_router(services))
    app.include_router(plan_router(services))
    app.include_router(pipeline_router(services))
    app.include_router(monitor_router(services))
    app.include_router(schedule_router(services))
    app.include_router(worktree_router(services))
    app.include_router(activity_router(services))
    app.include_router(usage_router(services))
    app.include_router(web_router(services))
    app.include_router(notify_router(services))
    app.include_router(vault_router(services))

    @app.get(f"/{API_VERSION}/health")
    async def health() -> Health:
        return await health_out(services)

    @app.post(f"/{API_VERSION}/sessions", status_code=201)
    async def create_session(body: SessionCreate) -> SessionOut:
        workspace = anyio.Path(body.workspace)
        if not workspace.is_absolute() or not await workspace.is_dir():
            raise InvalidRequestError(
                f"workspace {body.workspace!r} is not an existing absolute directory; create it or pass another"
            )
        options = check_session_options(body.options, in_space=body.space is not None)
        adapter, model, mode = body.adapter, body.model, str(body.permission_mode)
        row: ModelRow | None = None
        if body.model_row is not None:
            try:
                row = await in_thread(store.get_model_row, body.model_row)
            except NotFoundError:
                raise InvalidRequestError(
                    f"model_row {body.model_row!r} not found; list the model rows with GET /{API_VERSION}/models "
                    "(octipusctl models)"
                ) from None
            given = {"adapter": adapter, "model": model, "permission_mode": mode}
            conflicts = [
                f"{field}={value!r} (the row has {getattr(row, field)!r})"
                for field, value in given.items()
                if field in body.model_fields_set and value is not None and value != getattr(row, field)
            ]
            if conflicts:
                raise InvalidRequestError(
                    f"a session created from model row {row.name!r} takes the row's adapter, model and "
                    f"permission_mode, but the request also sets {', '.join(conflicts)}; drop those fields "
                    "or use another model row"
                )
            adapter, model, mode = row.adapter, row.model, row.permission_mode
        if adapter not in services.adapters:
            source = f"model row {row.name!r} uses adapter" if row is not None else "unknown adapter"
            raise InvalidRequestError(
                f"{source} {adapter!r}, which is not installed; installed adapters: {', '.join(sorted(services.adapters))}"
            )
        space_id: str | None = None
        if body.space is not None:
            space = await in_thread(store.get_space, body.space)
            check_space_model(space, row, services.adapters.get(adapter))
            space_id = space.id
        session = await in_thread(
            store.create_session,
            workspace=str(await workspace.resolve()),
            adapter=adapter,
            title=body.title,
            model=model,
            permission_mode=mode,
            attended=body.attended,
            model_row_id=row.id if row is not None else None,
            options=options,
            space_id=space_id,
        )
        return out(SessionOut, session)

    @app.get(f"/{API_VERSION}/sessions")
    async def list_sessions(limit: Limit = 100) -> list[SessionOut]:
        return [out(SessionOut, s) for s in await in_thread(store.list_sessions, limit=limit)]

    @app.get(f"/{API_VERSION}/sessions/{{session_id}}")
    async def get_session(session_id: str) -> SessionOut:
        return out(SessionOut, await in_thread(store.get_session, session_id))

    @app.post(f"/{API_VERSION}/sessions/{{session_id}}/turns", status_code=202)
    async def post_turn(session_id: str, body: TurnCreate, request: Request) -> RunOut:
        if body.host_services:
            _may_grant_host_services(request, body.author, services.user)
        return _run_out(
            await runs.post_turn(
                session_id, body.prompt, plan=body.plan, author=body.author, host_services=body.host_services
            )
        )

    @app.post(f"/{API_VERSION}/sessions/{{session_id}}/steer", status_code=202)
    async def steer(session_id: str, body: SteerCreate) -> SteerOut:
        await in_thread(store.get_session, session_id)  # 404 for an unknown session
        return SteerOut(**await runs.steer(session_id, body.text))

    @app.get(f"/{API_VERSION}/runs")
    async def list_runs(
        session_id: str | None = None, status: str | None = None, limit: Limit = 100
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
    async def list_events(run_id: str, after: After = 0, limit: Limit = 1000) -> list[EventOut]:
        await in_thread(store.get_run, run_id)
        events = await in_thread(store.list_events, run_id, after_seq=after, limit=limit)
        return [out(EventOut, e) for e in events]

    @app.get(
        f"/{API_VERSION}/runs/{{run_id}}/stream",
        response_class=StreamingResponse,
        responses={
            200: {
                "description": "Server-sent events: `id` the event's seq, `event` its kind, `data` an EventOut",
                "content": {"text/event-stream": {"schema": EVENT_FRAME_SCHEMA}},
            }
        },
    )
    async def stream_run(
        run_id: str, after: After = 0, last_event_id: LastEventId = None
    ) -> StreamingResponse:
        """The run's events as server-sent events (each ``data`` an ``EventOut``), live until it ends;
        ``Last-Event-ID`` (or ``after``) resumes after that ``seq``. Both are checked, and the run
        found (404), before the stream starts."""
        await in_thread(store.get_run, run_id)  # 404 before the stream starts
        start = after if last_event_id is None else last_event_id

        async def frames() -> AsyncIterator[bytes]:
            async for batch in hub.follow(run_id, after_seq=start):
                yield encode_batch(batch)

        return StreamingResponse(
            frames(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    def _row_out(row: ModelRow) -> ModelRowOut:
        data = dump(row)
        data["additive_flags"] = list(row.additive_flags)
        data["capabilities"] = capabilities_for(
            row.adapter, services.adapters.get(row.adapter), row.cli_agent
        )
        return ModelRowOut(**{k: v for k, v in data.items() if k in ModelRowOut.model_fields})

    @app.post(f"/{API_VERSION}/models", status_code=201)
    async def create_model_row(body: ModelRowCreate) -> ModelRowOut:
        checked = validate_model_row(body.model_dump(), services.adapters)
        return _row_out(await in_thread(store.create_model_row, **checked))

    @app.get(f"/{API_VERSION}/models")
    async def list_model_rows() -> list[ModelRowOut]:
        return [_row_out(r) for r in await in_thread(store.list_model_rows)]

    @app.get(f"/{API_VERSION}/models/{{id_or_name}}")
    async def get_model_row(id_or_name: str) -> ModelRowOut:
        return _row_out(await in_thread(store.get_model_row, id_or_name))

    @app.patch(f"/{API_VERSION}/models/{{id_or_name}}")
    async def update_model_row(id_or_name: str, body: ModelRowUpdate) -> ModelRowOut:
        given = body.model_dump(exclude_unset=True)
        nulls = sorted(k for k, v in given.items() if v is None and k not in ("binary", "model"))
        if nulls:
            raise InvalidRequestError(
                f"{', '.join(nulls)} cannot be null; only binary and model can be cleared with null"
            )
        current = await in_thread(store.get_model_row, id_or_name)
        merged = {
            "name": current.name,
            "adapter": current.adapter,
            "binary": current.binary,
            "model": current.model,
            "permission_mode": current.permission_mode,
            "additive_flags": list(current.additive_flags),
            "metadata": current.metadata,
            **given,
        }
        checked = validate_model_row(merged, services.adapters)
        changes = {k: checked[k] for k in given}
        if "adapter" in given:  # the stored flags must suit the new adapter, normalized by it
            changes["additive_flags"] = checked["additive_flags"]
        return _row_out(await in_thread(store.update_model_row, current.id, **changes))

    @app.delete(f"/{API_VERSION}/models/{{id_or_name}}", status_code=204)
    async def delete_model_row(id_or_name: str) -> Response:
        await in_thread(store.delete_model_row, id_or_name)
        return Response(status_code=204)

    return app


async def health_out(services: Services) -> Health:
    """What ``GET /v1/health`` answers (the health page shows the same): the daemon, its store,
    live runs, containment, the reaper, the web listener, the notifier and each adapter's binary."""
    return Health(
        status="ok",
        api_version=API_VERSION,
        daemon_version=__version__,
        pid=os.getpid(),
        database=services.store.url_for_display,
        live_runs=len(services.runs.live_runs()),
        warnings=await services.gate.unloadable(),
        process_containment=str(services.containment.mechanism) if services.containment else None,
        process_containment_detail=services.containment.detail if services.containment else None,
        worktree_reaper=_reaper_out(services),
        web=WebHealth(origin=services.web.origin, tls=services.web.tls) if services.web else None,
        notifier=notifier_health(services),
        vault=await _vault_health(services),
        shell_sandbox=_sandbox_out(services.runs.services.sandbox),
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


def _may_grant_host_services(request: Request, author: str | None, user: str) -> None:
    """Refuse ``host_services`` unless the daemon's own user asks on the Unix socket: it shares the
    host's network and Docker socket (root-equivalent) with the run's shell commands.

    Raises:
        ForbiddenError: asked through the web listener, or by a space member other than the daemon's
            user.
    """
    if via_web(request):
        raise ForbiddenError(
            "host_services is granted only on the daemon's Unix socket (octipusctl run --host-services): "
            "it shares the host's network and Docker socket with the run's shell commands"
        )
    if author is not None and author != user:
        raise ForbiddenError(
            f"host_services is granted only by the daemon's user ({user}), not by the space member {author!r}"
        )


async def _vault_health(services: Services) -> VaultHealth | None:
    """The vault's key source and entry count, or None when the daemon has no vault."""
    if services.vault is None:
        return None
    status = await in_thread(services.vault.status)
    return VaultHealth(**dataclasses.asdict(status))


def _sandbox_out(sandbox: ShellSandbox) -> ShellSandboxHealth:
    """The shell sandbox's mode, its runner or why there is none."""
    runner = sandbox.runner
    return ShellSandboxHealth(
        mode=sandbox.mode.value,
        in_force=sandbox.in_force,
        runner=runner.kind.value if runner is not None else None,
        runner_path=str(runner.path) if runner is not None else None,
        reason=sandbox.unavailable or None,
    )


def _run_out(run: Any) -> RunOut:
    return out(RunOut, run)


def _reaper_out(services: Services) -> WorktreeReaperOut | None:
    """The orphan reaper's period and last sweep, or None when it does not run."""
    reaper = services.reaper
    if reaper is None:
        return None
    last = reaper.last
    return WorktreeReaperOut(
        interval_ms=round(reaper.interval_s * 1000),
        sweeps=reaper.sweeps,
        last_started_at=last.started_at if last else None,
        last_ended_at=last.ended_at if last else None,
        error=last.error if last else None,
        reports=[
            ReapReportOut(
                id=r.id, path=printable(str(r.path)), action=r.action.value, reason=printable(r.reason)
            )
            for r in (last.reports if last else ())
        ],
    )
