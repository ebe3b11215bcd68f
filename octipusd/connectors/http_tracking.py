"""The HTTP transport wrapper of a streamable HTTP connector (imported when one is connected)."""

from __future__ import annotations

import json

import httpx2

from octipusd.connectors.transport import MCP_SESSION_HEADER, TRACKER, Handoff

__all__ = ["ConnectTrackingTransport"]


class ConnectTrackingTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport that marks the current call undelivered when its POST cannot connect,
    and notes the server's ``Mcp-Session-Id``.

    ``httpx2.ConnectError`` is raised before any request byte is written (no TCP/TLS connection
    was established), so the server cannot have received the ``tools/call``. The session id is
    recorded with every journaled call (:class:`DispatchRef`), so that a restarted daemon can
    terminate the session of a request it left in flight.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner
        self.session_id: str | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.ConnectError:
            tracker = TRACKER.get()
            if tracker is not None and tracker.state is Handoff.SENT and _posts_tools_call(request):
                tracker.state = Handoff.REFUSED
            raise
        session_id = response.headers.get(MCP_SESSION_HEADER)
        if session_id:
            self.session_id = session_id
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _posts_tools_call(request: httpx2.Request) -> bool:
    if request.method != "POST":
        return False
    try:
        body = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return False
    return isinstance(body, dict) and body.get("method") == "tools/call"
