"""Who may reach a run's bridge, and whether a tool call's client is still there.

:class:`CapabilityGate` is the ASGI middleware in front of the MCP app: only requests bearing the
run's capability pass, and at shutdown it ends the bridge's traffic at once. It marks each request
whose client went away before its response was complete (:data:`CALLER_GONE`), which
:class:`Caller` watches for one tool call until it starts running (seed 003 "Approval waits in
managed CLI runs": queued calls whose callers disconnected are discarded before execution). The
caller is the call's :class:`~octipusd.toolkit.CallWatch`: it tells the host why the bridge stopped
the call (its caller left, a deadline, the run's end) and holds the authorization backstop during
approval waits.
"""

from __future__ import annotations

import contextlib
import hmac
import math
from collections.abc import AsyncIterator, Iterator

import anyio
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from octipusd.toolkit import CallStop, StopCause

__all__ = ["CALLER_GONE", "Caller", "CapabilityGate"]

#: Seconds the gate takes to finish a response it cut at shutdown (a 503, or the end of a stream).
_CUT_RESPONSE_SECONDS = 1.0

#: Key of the ASGI scope under which :class:`CapabilityGate` keeps an :class:`anyio.Event` set once the
#: request's client went away before its response was complete (a disconnected tool caller).
CALLER_GONE = "octipus.caller_gone"


class CapabilityGate:
    """ASGI middleware that admits only requests bearing the run's capability.

    Every HTTP request must carry ``Authorization: Bearer <capability>`` (scheme
    case-insensitive); anything else gets ``401 {"error": "invalid_capability"}`` and never
    reaches the wrapped app. Lifespan events pass through; websockets are refused.

    The gate also ends the bridge's traffic at shutdown: :meth:`close` refuses new requests
    (``503 {"error": "bridge_closed"}``), lets request/response exchanges finish, then
    cancels what is left (the clients' SSE streams), finishing those responses cleanly, so
    the server stops at once instead of waiting out uvicorn's graceful timeout.

    Args:
        app: The MCP ASGI app.
        capability: The run's capability.
    """

    def __init__(self, app: ASGIApp, capability: str) -> None:
        if not capability:
            raise ValueError("capability must not be empty")
        self._app = app
        self._expected = capability.encode()
        self._in_flight: set[anyio.CancelScope] = set()
        self._exchanges = 0  # admitted requests other than GET (which are long-lived streams)
        self._exchanges_done = anyio.Event()
        self._exchanges_done.set()
        self._closed = False

    def _admits(self, scope: Scope) -> bool:
        header = Headers(scope=scope).get("authorization")
        if header is None:
            return False
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(token.strip().encode(), self._expected)

    async def close(self, grace_seconds: float = 1.0) -> None:
        """Refuse further requests, let request/response exchanges finish, cut the rest.

        Args:
            grace_seconds: How long in-flight POST/DELETE requests may take to complete
                before they are cancelled too; GET streams are cancelled after it regardless.
        """
        self._closed = True
        with anyio.move_on_after(grace_seconds):
            await self._exchanges_done.wait()
        for request_scope in list(self._in_flight):
            request_scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if not (scope["type"] == "http" and self._admits(scope)):
            await JSONResponse({"error": "invalid_capability"}, status_code=401)(scope, receive, send)
            return
        if self._closed:
            await JSONResponse({"error": "bridge_closed"}, status_code=503)(scope, receive, send)
            return
        exchange = scope.get("method") != "GET"
        if exchange:
            if self._exchanges == 0:
                self._exchanges_done = anyio.Event()
            self._exchanges += 1
        try:
            await self._serve(scope, receive, send)
        finally:
            if exchange:
                self._exchanges -= 1
                if self._exchanges == 0:
                    self._exchanges_done.set()

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False
        finished = False
        gone = anyio.Event()  # set once the client went away before its response was complete
        scope[CALLER_GONE] = gone

        async def watching_receive() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not finished:
                gone.set()
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started, finished
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        with anyio.CancelScope() as request_scope:
            self._in_flight.add(request_scope)
            try:
                await self._app(scope, watching_receive, tracking_send)
            finally:
                self._in_flight.discard(request_scope)
                if not finished:
                    gone.set()
        if request_scope.cancelled_caught and not finished:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CUT_RESPONSE_SECONDS):
                if not started:
                    await JSONResponse({"error": "bridge_closed"}, status_code=503)(scope, receive, send)
                else:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})


class Caller:
    """One tool call's watch (a :class:`~octipusd.toolkit.CallWatch`): whether its client is still
    there until the call starts running, and why the bridge stopped it.

    Seed 003 ("Approval waits in managed CLI runs"): queued calls whose callers disconnected are
    discarded before execution, and a caller disconnecting during an approval fails the run (the
    host does that when its authorization is cancelled with an approval pending, naming the cause
    :meth:`stopped` gives). Once the call runs, a disconnect no longer stops it (its effects are the
    journal's to record).
    """

    def __init__(self) -> None:
        self.left = False
        self._scope: anyio.CancelScope | None = None
        self._stops: list[tuple[anyio.CancelScope, CallStop]] = []
        self._waits = 0
        self._backstop: tuple[anyio.CancelScope, float] | None = None

    @classmethod
    @contextlib.asynccontextmanager
    async def watching(cls, gone: anyio.Event | None) -> AsyncIterator[Caller]:
        """A caller watched for ``gone`` (None: a caller that cannot disconnect)."""
        caller = cls()
        if gone is None:
            yield caller
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(caller._watch, gone)
            try:
                yield caller
            finally:
                tg.cancel_scope.cancel()

    async def _watch(self, gone: anyio.Event) -> None:
        await gone.wait()
        self.left = True
        if self._scope is not None:
            self._scope.cancel()

    def stops_with(self, scope: anyio.CancelScope, stop: CallStop) -> None:
        """Name ``stop`` as the cause once ``scope`` (a deadline, the bridge's close) cancels the call."""
        self._stops.append((scope, stop))

    def stopped(self) -> CallStop | None:
        """Why the bridge cancelled the call: its caller left, or the first of its scopes that fired."""
        if self.left:
            return CallStop(StopCause.CALLER_LEFT, "its caller disconnected")
        return next((stop for scope, stop in self._stops if scope.cancel_called), None)

    def waiting(self, delta: int) -> None:
        """An approval wait of the call opens (+1) or ends (-1): the backstop holds while one is open,
        and starts afresh when the last one ends."""
        self._waits += delta
        if self._backstop is not None:
            scope, seconds = self._backstop
            scope.deadline = math.inf if self._waits > 0 else anyio.current_time() + seconds

    @contextlib.contextmanager
    def backstop(self, seconds: float) -> Iterator[anyio.CancelScope]:
        """A deadline of ``seconds`` on the permission check that holds during approval waits
        (:meth:`waiting`): it catches a host that hangs, never a person's answer."""
        stop = CallStop(
            StopCause.DEADLINE,
            f"its permission check took longer than the bridge's {seconds:g} s outside approval waits",
        )
        with anyio.CancelScope(deadline=anyio.current_time() + seconds) as scope:
            self._backstop = (scope, seconds)
            self._stops.append((scope, stop))
            try:
                yield scope
            finally:
                self._backstop = None
                self._stops.remove((scope, stop))

    @contextlib.contextmanager
    def until_running(self) -> Iterator[anyio.CancelScope]:
        """The phase before the call runs (queue, authorization): cancelled when the caller leaves."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self.left:
                scope.cancel()
            try:
                yield scope
            finally:
                self._scope = None
