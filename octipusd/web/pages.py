"""The HTML pages of sessions: the home page (every session with its runs) and ``/sessions/{id}``
(its runs, usage, work plan with feedback, and a steer box while a run is live, else a
next-turn box), plus their live fragments.

Conventions every page keeps:

- no inline script or style (the web listener's Content-Security-Policy forbids them): behaviour
  lives in ``static/*.js``, looks in ``static/style.css``; data for scripts goes in ``data-*``
  attributes;
- state changes go through the JSON API (``POST /v1/...``) with ``fetch`` from ``app.js``, which adds
  the ``X-CSRF-Token`` header from ``<meta name="csrf-token">`` (:func:`csrf_token`);
- a part of a page that updates live is an element with ``data-live="/fragments/..."`` (and
  ``data-live-run`` / ``data-live-session`` naming what it shows): ``app.js`` re-fetches it when the
  activity feed (``GET /v1/activity``) says that run or session changed; the fragment is rendered by
  the same template macro as the full page, so an event has one rendering;
- Jinja2 autoescapes everything; never mark vendor or agent text ``|safe``;
- the window's title (``base.html``) passes through the ``inert`` filter (:func:`inert_filter`):
  a session title or a branch name with a control character shows it as an escape.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from octipusd import __version__
from octipusd.api.common import CSRF_STATE_KEY, Services, out
from octipusd.api.models import RunOut, SessionOut, UsageTotalsOut
from octipusd.api.plan_routes import plan_out
from octipusd.errors import OctipusError
from octipusd.inert import inert
from octipusd.store.aio import in_thread
from octipusd.store.records import ApprovalStatus, RunStatus
from octipusd.web.present import money, session_name, short_time

__all__ = ["STATIC_DIR", "PageRoute", "csrf_token", "inert_filter", "pages_router", "render", "templates"]

#: Where the page's templates and static files live (package data).
TEMPLATE_DIR: Final = Path(__file__).parent / "templates"
STATIC_DIR: Final = Path(__file__).parent / "static"

#: Sessions the home page lists at most (newest first).
HOME_SESSIONS: Final = 100
#: Runs the home page and a session page list at most (newest first).
LISTED_RUNS: Final = 500


def inert_filter(value: object) -> str:
    """The template filter ``inert``: :func:`~octipusd.inert.inert` on text, and on already escaped
    markup (a ``{% filter %}`` block's output) without escaping it twice: the escapes it writes hold
    no character HTML gives a meaning to."""
    if isinstance(value, Markup):
        return Markup(inert(str(value)))
    return inert(str(value))


templates = Jinja2Templates(directory=str(TEMPLATE_DIR))
templates.env.filters["inert"] = inert_filter
templates.env.globals.update(
    money=money,
    session_name=session_name,
    short_time=short_time,
    terminal_statuses=frozenset(s.value for s in RunStatus if s.terminal),
)


def csrf_token(request: Request) -> str:
    """The CSRF token of the request's web session ("" on the Unix socket, which needs none)."""
    token = request.scope.get("state", {}).get(CSRF_STATE_KEY, "")
    return token if isinstance(token, str) else ""


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render a page template with the context every page has (version, CSRF token)."""
    context.update(version=__version__, csrf_token=csrf_token(request))
    return templates.TemplateResponse(request, name, context, status_code=status_code)


#: Where the live parts' fragments are served: their failures stay the API's JSON (the script reads
#: only the status), while a page's failure is a page a person reads.
FRAGMENTS_PREFIX: Final = "/fragments/"


class PageRoute(APIRoute):
    """A route of the HTML pages: an :class:`~octipusd.errors.OctipusError` it raises (an unknown id,
    a bad one) becomes a small HTML page with the error's status and message and a link home; under
    :data:`FRAGMENTS_PREFIX` it reaches the API's JSON error handlers unchanged."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except OctipusError as exc:
                if request.url.path.startswith(FRAGMENTS_PREFIX):
                    raise
                return render(request, "error.html", status_code=exc.http_status, error=exc)

        return page_handler


async def _home_context(services: Services) -> dict[str, Any]:
    """Sessions, newest first, each with its runs (newest first)."""
    store = services.store
    sessions = [out(SessionOut, s) for s in await in_thread(store.list_sessions, limit=HOME_SESSIONS)]
    runs: dict[str, list[RunOut]] = {s.id: [] for s in sessions}
    for run in await in_thread(store.list_runs, limit=LISTED_RUNS):
        if run.session_id in runs:
            runs[run.session_id].append(out(RunOut, run))
    return {"sessions": sessions, "runs": runs, "waiting": await _waiting(services)}


async def _waiting(services: Services, session_id: str | None = None) -> dict[str, str]:
    """Run id -> the id of the (newest) pending approval it waits on (of one session, or all): its
    badge links there."""
    pending = await in_thread(services.store.list_approvals, status=ApprovalStatus.PENDING, limit=LISTED_RUNS)
    waiting: dict[str, str] = {}
    for approval in pending:
        if approval.run_id is not None and session_id in (None, approval.session_id):
            waiting.setdefault(approval.run_id, approval.id)
    return waiting


async def _runs_context(services: Services, session_id: str) -> dict[str, Any]:
    """A session's runs and usage totals (what its runs fragment shows).

    Raises:
        NotFoundError: no such session.
    """
    store = services.store
    await in_thread(store.get_session, session_id)  # 404 for an unknown session
    runs = await in_thread(store.list_runs, session_id=session_id, limit=LISTED_RUNS)
    return {
        "runs": [out(RunOut, r) for r in runs],
        "usage": out(UsageTotalsOut, await in_thread(store.usage_totals, session_id)),
        "waiting": await _waiting(services, session_id),
    }


async def _plan_context(services: Services, session_id: str) -> dict[str, Any]:
    """A session's work plan with its feedback (what its plan fragment shows).

    Raises:
        NotFoundError: no such session.
    """
    return {"plan": plan_out(session_id, *await in_thread(services.store.read_plan, session_id))}


#: Run statuses of a run still going (steerable once it started).
_LIVE_STATUSES: Final = tuple(s for s in RunStatus if not s.terminal)


async def _controls_context(services: Services, session_id: str) -> dict[str, Any]:
    """Whether a root run of the session is live (the page offers Steer) or not (Next turn).

    Raises:
        NotFoundError: no such session.
    """
    store = services.store
    await in_thread(store.get_session, session_id)  # 404 for an unknown session
    going = await in_thread(
        store.list_runs, session_id=session_id, statuses=_LIVE_STATUSES, limit=LISTED_RUNS
    )
    live = any(r.parent_run_id is None for r in going)
    return {"session_id": session_id, "live": live, "next_turn": True}


async def _session_context(services: Services, session_id: str) -> dict[str, Any]:
    """A session (404: unknown), its runs, usage totals and work plan: the whole page.

    Raises:
        NotFoundError: no such session.
    """
    session = out(SessionOut, await in_thread(services.store.get_session, session_id))
    return {
        "session": session,
        **await _runs_context(services, session_id),
        **await _plan_context(services, session_id),
        **await _controls_context(services, session_id),
    }


def pages_router(services: Services) -> APIRouter:
    """The session pages over ``services`` (left out of the OpenAPI schema: they are not the API)."""
    router = APIRouter(include_in_schema=False, route_class=PageRoute)

    @router.get("/", response_class=HTMLResponse)
    async def home(request: Request) -> HTMLResponse:
        return render(request, "home.html", **await _home_context(services))

    @router.get("/fragments/sessions", response_class=HTMLResponse)
    async def home_fragment(request: Request) -> HTMLResponse:
        return render(request, "fragments/sessions.html", **await _home_context(services))

    @router.get("/sessions/{session_id}", response_class=HTMLResponse)
    async def session_page(request: Request, session_id: str) -> HTMLResponse:
        return render(request, "session.html", **await _session_context(services, session_id))

    @router.get("/fragments/sessions/{session_id}/runs", response_class=HTMLResponse)
    async def session_runs(request: Request, session_id: str) -> HTMLResponse:
        return render(request, "fragments/session_runs.html", **await _runs_context(services, session_id))

    @router.get("/fragments/sessions/{session_id}/plan", response_class=HTMLResponse)
    async def session_plan(request: Request, session_id: str) -> HTMLResponse:
        return render(request, "fragments/plan.html", **await _plan_context(services, session_id))

    @router.get("/fragments/sessions/{session_id}/controls", response_class=HTMLResponse)
    async def session_controls(request: Request, session_id: str) -> HTMLResponse:
        return render(request, "fragments/controls.html", **await _controls_context(services, session_id))

    return router
