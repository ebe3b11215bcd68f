"""The HTML pages: each renders from the same services the JSON routes use, and updates live in the
browser through ``static/app.js`` (``EventSource`` on the run's ``/v1/runs/{id}/stream``).

Conventions every page keeps:

- no inline script or style (the web listener's Content-Security-Policy forbids them): behaviour
  lives in ``static/*.js``, looks in ``static/style.css``; data for scripts goes in ``data-*``
  attributes;
- state changes go through the JSON API (``POST /v1/...``) with ``fetch`` from ``app.js``, which adds
  the ``X-CSRF-Token`` header from ``<meta name="csrf-token">`` (:func:`csrf_token`);
- Jinja2 autoescapes everything; never mark vendor or agent text ``|safe``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from octipusd import __version__
from octipusd.api.common import CSRF_STATE_KEY, Services
from octipusd.store.aio import in_thread

__all__ = ["STATIC_DIR", "csrf_token", "pages_router", "templates"]

#: Where the page's templates and static files live (package data).
TEMPLATE_DIR: Final = Path(__file__).parent / "templates"
STATIC_DIR: Final = Path(__file__).parent / "static"

templates = Jinja2Templates(directory=str(TEMPLATE_DIR))


def csrf_token(request: Request) -> str:
    """The CSRF token of the request's web session ("" on the Unix socket, which needs none)."""
    token = request.scope.get("state", {}).get(CSRF_STATE_KEY, "")
    return token if isinstance(token, str) else ""


def render(request: Request, name: str, **context: Any) -> HTMLResponse:
    """Render a page template with the context every page has (version, CSRF token)."""
    context.update(version=__version__, csrf_token=csrf_token(request))
    return templates.TemplateResponse(request, name, context)


def pages_router(services: Services) -> APIRouter:
    """The HTML pages over ``services`` (left out of the OpenAPI schema: they are not the API)."""
    router = APIRouter(include_in_schema=False)
    store = services.store

    @router.get("/", response_class=HTMLResponse)
    async def home(request: Request) -> HTMLResponse:
        sessions = await in_thread(store.list_sessions, limit=100)
        return render(request, "home.html", sessions=sessions)

    return router
