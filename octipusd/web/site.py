"""The application both listeners serve: the JSON API plus the HTML pages and their static files.

The web client sits above the API (it imports the API's services and models, never the other way),
so the composition root builds the site here rather than in :func:`octipusd.api.app.create_app`.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from octipusd.api.app import create_app
from octipusd.api.common import Services
from octipusd.web.pages import STATIC_DIR, pages_router
from octipusd.web.pipeline_pages import pipeline_pages_router
from octipusd.web.review_pages import review_router
from octipusd.web.run_pages import run_pages_router
from octipusd.web.schedule_pages import schedule_pages_router

__all__ = ["create_site"]


def create_site(services: Services) -> FastAPI:
    """The API application over ``services`` with the pages (``/``...) and ``/static`` added."""
    app = create_app(services)
    app.include_router(pages_router(services))
    app.include_router(run_pages_router(services))
    app.include_router(review_router(services))
    app.include_router(pipeline_pages_router(services))
    app.include_router(schedule_pages_router(services))
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
