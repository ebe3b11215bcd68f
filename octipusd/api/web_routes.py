"""``GET /v1/web``: the ready link of the page, given only on the Unix socket (``octipusctl web``).

The link carries the page's token. Whoever can open the daemon's socket is its user (the socket
is 0600 and every peer's uid is checked), so the socket may hand it out; the web listener never
does, even to a holder of the token.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from octipusd.api import API_VERSION
from octipusd.api.common import Services, via_web
from octipusd.api.models import WebOut
from octipusd.errors import ConflictError, ForbiddenError

__all__ = ["web_router"]


def web_router(services: Services) -> APIRouter:
    """The route that tells the page's link over ``services``."""
    router = APIRouter(prefix=f"/{API_VERSION}")

    @router.get("/web")
    async def web_link(request: Request) -> WebOut:
        """The page's link with its token (Unix socket only: the web listener refuses it, 403)."""
        if via_web(request):
            raise ForbiddenError(
                "the page's link is given only on the daemon's Unix socket: run octipusctl web"
            )
        if services.web is None:
            raise ConflictError("the web page is off (web.enabled = false); turn it on and restart octipusd")
        return WebOut(url=services.web.link, origin=services.web.origin, tls=services.web.tls)

    return router
