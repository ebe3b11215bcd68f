"""The per-run loopback MCP bridge.

:func:`open_bridge` starts one MCP server (streamable HTTP, ``mcp`` SDK 2.x ``MCPServer``)
for one run and stops it when the run's ``async with`` block ends: the bridge dies with the
run (DESIGN.md "The data flow of one run", step 3; seed 003 "How tools and context work").

Security:

* it listens on ``127.0.0.1`` only, on a port chosen by the kernel;
* every HTTP request (POST, GET, DELETE, any path) must carry
  ``Authorization: Bearer <capability>``, a fresh ``secrets.token_urlsafe(32)`` (256 bits)
  compared with :func:`hmac.compare_digest`; otherwise :class:`CapabilityGate` answers
  ``401 {"error": "invalid_capability"}`` before the MCP app sees the request. A rejected
  request ends nothing: the bridge keeps serving the right capability. Claude Code makes
  exactly one request on a 401 and reports the server ``failed`` (observed.md §1.5);
* the SDK's DNS-rebinding protection stays on, with the allowed ``Host``/``Origin`` set to
  ``127.0.0.1:<port>`` and ``localhost:<port>`` (sources.md §5.3: the SDK auto-enables it for
  127.0.0.1 and answers 421 to any other Host).

Each ``tools/call`` goes: identity bound by the bridge (identity-looking argument keys are
dropped) -> the worker's queue (except ``bypass_queue`` tools) -> ``host.authorize`` with the
tool's id (``spec.tool_id``; a denial returns ``isError`` ``denied: <reason>`` and the tool does
not run) -> ``host.record("tool_call_started")`` -> the handler (under its deadline; a mutating
tool's handler runs inside ``host.run_action``, the action journal's execution boundary, seed
000) -> ``host.record("tool_call_finished")`` -> the response. Results are plain text content (no
``structuredContent``; observed.md §1.5/§1.6: Claude otherwise passes structured output on as a
JSON string and rejects it for permission tools); a dict result is JSON-encoded text. Every
non-read-only response gets a second text block with the fresh run context from
``host.run_context``; a failing refresh adds a note instead and never turns a successful tool
into an error (seed 003 "Plans, feedback and delegation"). Any failure inside a tool becomes an
``isError`` result with a clear text; the bridge itself keeps running.

Events recorded through :meth:`ToolHost.record`:

* ``tool_call_started``: ``{"call_id", "tool", "arguments"}``;
* ``tool_call_finished``: ``{"call_id", "tool", "is_error", "duration_seconds"[, "error"]
  [, "cancelled"]}``;
* ``tool_call_denied``: ``{"call_id", "tool", "reason"}``;
* ``tool_call_discarded``: ``{"call_id", "tool", "reason"}``: its caller disconnected while the call
  was queued or being authorized (an approval wait included); it never ran (seed 003 "Approval
  waits in managed CLI runs").

Shutdown (when the run's block exits, normally, with an error or cancelled; shielded and
bounded): calls still queued or running are stopped -- a running shell job's process group is
killed -- and answer ``isError`` "the run ended while this call was pending or running"; new
requests get ``503``; request/response exchanges get a moment to deliver those answers; the
clients' open SSE streams are ended; then uvicorn stops and the port and capability are gone.
An exception raised in the caller's block propagates unchanged (not wrapped in an exception
group).

The server runs on uvicorn inside the caller's event loop (asyncio backend only), without
touching process-wide signal handlers or logging configuration.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, InputRequiredResult, TextContent, Tool as MCPTool, ToolAnnotations
from starlette.requests import Request

from octipusd.adapter import BRIDGE_CALL_TIMEOUT_SECONDS, BridgeEndpoint
from octipusd.bridge.access import CALLER_GONE, Caller, CapabilityGate
from octipusd.bridge.embedded import (
    IN_BRIDGE_SERVER,
    EmbeddedConfig,
    EmbeddedServer,
    QuietH11Protocol,
    bind_loopback,
    install_uvicorn_filter,
)
from octipusd.bridge.queue import DEFAULT_WORKER_QUEUES, WorkerQueues
from octipusd.errors import BridgeError, OctipusError, describe_error, traceback_of
from octipusd.toolkit import (
    AuthorizationResult,
    CallStop,
    Executed,
    RunIdentity,
    StopCause,
    ToolHost,
    ToolOutcome,
    ToolResult,
    ToolSpec,
    run_unjournaled,
    strip_identity_arguments,
    validate_tool_specs,
)
from octipusd.toolkit.secrets import run_spec

logger = logging.getLogger(__name__)

#: Path of the MCP endpoint on the bridge.
MCP_PATH = "/mcp"
#: First line of the run-context block appended to non-read-only tool responses.
RUN_CONTEXT_HEADER = "[octipus run context] Fresh context of this run; check it before further affected work:"

#: Seconds between two looks at whether uvicorn has started (it exposes no startup event).
_STARTUP_POLL_SECONDS = 0.002

_RUN_ENDED = "the run ended while this call was pending or running; it was stopped and will not run again"
_CALLER_GONE = "the caller disconnected before the call ran; it was discarded and will not run"
_BRIDGE_CLOSED = CallStop(StopCause.RUN_ENDING, "the bridge closed with its run")

_INSTRUCTIONS = (
    "Octipus tools for this run. Calls run with the run's identity and Octipus permissions. "
    "Responses of tools that change something end with a fresh run context block (plan, feedback, "
    "queued guidance): check it before further affected work and before your final answer."
)


@dataclass(frozen=True)
class BridgeLimits:
    """Deadlines and bounds of one bridge (all durations in seconds).

    Attributes:
        startup_timeout_seconds: How long the server may take to start before
            :class:`BridgeError`.
        shutdown_timeout_seconds: Bound of the whole shutdown at context exit; after it the
            server task is cancelled.
        drain_seconds: At shutdown, how long stopped calls get to hand back their results,
            then how long request/response exchanges get to complete before the remaining
            HTTP requests are cut.
        graceful_shutdown_seconds: uvicorn's own bound on in-flight requests at shutdown
            (whole seconds); a backstop, as the bridge has already ended them.
        authorize_timeout_seconds: Backstop on :meth:`ToolHost.authorize` against a host that hangs:
            it holds while an approval of the call is open (:meth:`~octipusd.toolkit.CallWatch.waiting`) and starts
            afresh when it closes, so a permission approval followed by recovery reviews is never
            cut (each answer has the host's own five-minute limit, and the whole request its wall
            clock); expiry denies the call.
        request_timeout_seconds: Wall clock of one whole tool request, queue, approval and
            delegation waits included (seed 003: bridge tool requests have a separate two-hour
            wall-clock timeout); expiry stops the call and answers with an error result.
        vendor_grace_seconds: How much longer than ``request_timeout_seconds`` the vendor's own
            MCP tool timeout is (:attr:`~octipusd.adapter.BridgeEndpoint.tool_timeout_seconds`), so
            that the bridge's error answer reaches the vendor before the vendor gives up.
        context_timeout_seconds: Deadline of a run-context refresh (seed 003: status reads
            time out after 15 s).
        record_timeout_seconds: Deadline of one :meth:`ToolHost.record`.
        max_sessions: Concurrent MCP sessions the bridge accepts.
    """

    startup_timeout_seconds: float = 10.0
    shutdown_timeout_seconds: float = 5.0
    drain_seconds: float = 1.0
    graceful_shutdown_seconds: int = 1
    authorize_timeout_seconds: float = 600.0
    request_timeout_seconds: float = BRIDGE_CALL_TIMEOUT_SECONDS
    vendor_grace_seconds: float = 30.0
    context_timeout_seconds: float = 15.0
    record_timeout_seconds: float = 10.0
    max_sessions: int = 64


# ---------------------------------------------------------------------------- dispatch


def _encode_result(value: ToolResult) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


class _Dispatcher:
    """Runs tool calls for one bridge: queue, authorization, execution, events, context."""

    def __init__(
        self,
        identity: RunIdentity,
        host: ToolHost,
        tools: Sequence[ToolSpec],
        lock: anyio.Lock,
        limits: BridgeLimits,
    ) -> None:
        self.identity = identity
        self.host = host
        self.tools = {spec.name: spec for spec in tools}
        self.lock = lock
        self.limits = limits
        self._active: set[anyio.CancelScope] = set()
        self._idle = anyio.Event()
        self._idle.set()
        self._closed = False

    async def close(self, grace_seconds: float) -> None:
        """Stop every running or queued call (each answers with an error result) and refuse
        new ones; wait up to ``grace_seconds`` for them to hand their results back."""
        self._closed = True
        for call_scope in list(self._active):
            call_scope.cancel()
        with anyio.move_on_after(grace_seconds):
            await self._idle.wait()

    async def call(
        self, name: str, raw_arguments: dict[str, Any] | None, gone: anyio.Event | None = None
    ) -> CallToolResult:
        """Run one ``tools/call``; ``gone`` is set when its caller disconnects (see :class:`Caller`)."""
        if self._closed:
            return _result([_RUN_ENDED], is_error=True)
        wall_clock = self.limits.request_timeout_seconds
        with anyio.CancelScope() as call_scope:
            if not self._active:
                self._idle = anyio.Event()
            self._active.add(call_scope)
            try:
                with anyio.move_on_after(wall_clock) as deadline:
                    async with Caller.watching(gone) as caller:
                        caller.stops_with(call_scope, _BRIDGE_CLOSED)
                        caller.stops_with(
                            deadline,
                            CallStop(
                                StopCause.DEADLINE,
                                f"the bridge's wall clock of {wall_clock:g} s for one tool request ran out",
                            ),
                        )
                        return await self._call(name, raw_arguments, caller)
                if deadline.cancelled_caught:
                    return _result(
                        [
                            f"{name} did not complete within the bridge's wall clock of "
                            f"{wall_clock:g} s (approval and delegation waits included) and was stopped"
                        ],
                        is_error=True,
                    )
            finally:
                self._active.discard(call_scope)
                if not self._active:
                    self._idle.set()
        # Only reached when close() cancelled the call.
        return _result([_RUN_ENDED], is_error=True)

    async def _call(self, name: str, raw_arguments: dict[str, Any] | None, caller: Caller) -> CallToolResult:
        spec = self.tools.get(name)
        if spec is None:
            available = ", ".join(sorted(self.tools))
            return _result([f"unknown tool {name!r}; this bridge offers: {available}"], is_error=True)
        arguments = strip_identity_arguments(raw_arguments)
        call_id = uuid.uuid4().hex
        queued = not spec.bypass_queue
        locked = False
        try:
            # until the call runs, a caller that disconnects discards it: it leaves the queue, or its
            # authorization (an approval wait) is cancelled, and it never runs (seed 003)
            with caller.until_running() as before:
                if queued:
                    await self.lock.acquire()
                    locked = True
                verdict = await self._authorize(spec, arguments, caller)
            if before.cancelled_caught or caller.left:
                await self._record(
                    "tool_call_discarded", {"call_id": call_id, "tool": spec.tool_id, "reason": _CALLER_GONE}
                )
                return _result([_CALLER_GONE], is_error=True)
            return await self._run(spec, arguments, call_id, verdict)
        finally:
            if locked:
                self.lock.release()

    async def _run(
        self, spec: ToolSpec, arguments: dict[str, Any], call_id: str, verdict: AuthorizationResult
    ) -> CallToolResult:
        """Answer a denied call, or run an allowed one and answer with its result.

        Records ``tool_call_denied``, or ``tool_call_started`` then ``tool_call_finished``; runs the
        handler under ``spec.timeout_seconds``, a mutating tool's inside :meth:`ToolHost.run_action`
        (the journal's boundary). Every response but a read-only tool's carries the run context.

        Args:
            spec: The tool.
            arguments: Its arguments, stripped of identity keys.
            call_id: The call's id in the events.
            verdict: The permission decision.

        Returns:
            The tool's result; ``isError`` with ``denied: <reason>`` for a denied call, with the
            tool's failure, or with the host's failure when the host could not run the call (the
            journal did not record it, so the body did not run).

        Raises:
            Cancelled: the call was stopped while it ran (the run ended, or the bridge's wall clock
                ran out); ``tool_call_finished`` is recorded with ``cancelled`` first, shielded.
        """
        if not verdict.allowed:
            reason = verdict.reason or "not permitted"
            await self._record(
                "tool_call_denied", {"call_id": call_id, "tool": spec.tool_id, "reason": reason}
            )
            return await self._respond(spec, f"denied: {reason}", is_error=True)
        await self._record(
            "tool_call_started", {"call_id": call_id, "tool": spec.tool_id, "arguments": arguments}
        )
        started = time.monotonic()
        finished: dict[str, Any] = {"call_id": call_id, "tool": spec.tool_id}
        try:
            executed = await self._execute(spec, arguments)
        except anyio.get_cancelled_exc_class():
            finished.update(
                is_error=True, cancelled=True, duration_seconds=round(time.monotonic() - started, 3)
            )
            with anyio.CancelScope(shield=True):
                await self._record("tool_call_finished", finished)
            raise
        except Exception as exc:  # noqa: BLE001 - the call did not run: the host's failure is the tool error
            return await self._not_run(spec, finished, exc)
        text = _encode_result(executed.value)
        finished.update(is_error=executed.is_error, duration_seconds=round(time.monotonic() - started, 3))
        if spec.mutating:
            finished.update(outcome=str(executed.outcome), action_id=executed.action_id)
        if executed.is_error:
            finished["error"] = text
        await self._record("tool_call_finished", finished)
        return await self._respond(spec, text, is_error=executed.is_error)

    async def _not_run(self, spec: ToolSpec, finished: dict[str, Any], exc: Exception) -> CallToolResult:
        """The host failed before the body (the journal could not record the call): answer its error."""
        _log_host_failure(f"{spec.tool_id} was not run (run {self.identity.run_id})", exc)
        message = exc.message if isinstance(exc, OctipusError) else f"{type(exc).__name__}: {exc}"
        await self._record(
            "tool_call_finished", {**finished, "is_error": True, "error": message, "not_run": True}
        )
        return await self._respond(spec, message, is_error=True)

    async def _execute(self, spec: ToolSpec, arguments: dict[str, Any]) -> Executed:
        """Run the handler under its deadline, a mutating tool's inside the journal's boundary."""

        async def body() -> ToolResult | ToolOutcome:
            with anyio.fail_after(spec.timeout_seconds):
                return await run_spec(spec, self.identity, self.host, arguments)

        if spec.mutating:
            return await self.host.run_action(
                self.identity, spec.tool_id, dict(arguments), body, spec.timeout_seconds
            )
        return await run_unjournaled(spec.tool_id, body, spec.timeout_seconds)

    async def _authorize(
        self, spec: ToolSpec, arguments: dict[str, Any], caller: Caller
    ) -> AuthorizationResult:
        timeout = self.limits.authorize_timeout_seconds
        try:
            with caller.backstop(timeout) as backstop:
                verdict = await self.host.authorize(
                    self.identity, spec.tool_id, dict(arguments), watch=caller
                )
        except Exception as exc:  # fail closed: a failed permission check denies the call
            logger.exception("authorization of %s failed (run %s)", spec.tool_id, self.identity.run_id)
            return AuthorizationResult(False, f"the permission check failed ({type(exc).__name__}: {exc})")
        if backstop.cancelled_caught:
            return AuthorizationResult(
                False, f"no permission decision within {timeout:g} s (approval waits not counted)"
            )
        if not isinstance(verdict, AuthorizationResult):
            return AuthorizationResult(False, "the permission check returned no verdict")
        return verdict

    async def _respond(self, spec: ToolSpec, text: str, *, is_error: bool) -> CallToolResult:
        blocks = [text]
        if not spec.read_only:
            blocks.append(await self._context_block())
        return _result(blocks, is_error=is_error)

    async def _context_block(self) -> str:
        try:
            with anyio.fail_after(self.limits.context_timeout_seconds):
                context = await self.host.run_context(self.identity)
            return f"{RUN_CONTEXT_HEADER}\n{json.dumps(context, ensure_ascii=False, default=str)}"
        except Exception as exc:  # noqa: BLE001 - a failed refresh is a note; the tool result stands
            _log_host_failure(f"run context refresh failed (run {self.identity.run_id})", exc)
            detail = "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
            return (
                "[octipus run context] unavailable right now "
                f"({detail}); the tool result above stands. Call get_cli_run_context to retry."
            )

    async def _record(self, kind: str, data: dict[str, Any]) -> None:
        try:
            with anyio.fail_after(self.limits.record_timeout_seconds):
                await self.host.record(self.identity, kind, data)
        except Exception as exc:  # noqa: BLE001 - a lost event must not turn the tool's answer into an error
            _log_host_failure(f"recording {kind} failed (run {self.identity.run_id})", exc)


def _log_host_failure(what: str, exc: Exception) -> None:
    """Log a failure of the run's host, with its traceback unless it is an Octipus error or a
    timeout (whose message says what happened)."""
    logger.warning("%s: %s", what, describe_error(exc), exc_info=traceback_of(exc))


def _result(blocks: Sequence[str], *, is_error: bool) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=block) for block in blocks], is_error=is_error
    )


def _mcp_tool(spec: ToolSpec) -> MCPTool:
    return MCPTool(
        name=spec.name,
        description=spec.description,
        input_schema=dict(spec.input_schema),
        annotations=ToolAnnotations(read_only_hint=spec.read_only),
    )


@contextlib.contextmanager
def _without_logging_side_effects() -> Iterator[None]:
    """Keep ``MCPServer()`` from configuring the root logger.

    ``MCPServer.__init__`` calls ``logging.basicConfig`` with a Rich handler (SDK 2.3
    ``mcpserver/utilities/logging.py``); ``basicConfig`` does nothing when the root logger
    already has a handler, so one is lent for the duration of the constructor.
    """
    root = logging.getLogger()
    if root.handlers:
        yield
        return
    placeholder = logging.NullHandler()
    root.addHandler(placeholder)
    try:
        yield
    finally:
        root.removeHandler(placeholder)


class _BridgeMCPServer(MCPServer[Any]):
    """``MCPServer`` whose tool list and calls come from Octipus tool specs.

    The specs carry hand-written JSON schemas, which ``MCPServer.add_tool`` (signature
    introspection) cannot express, so ``list_tools``/``call_tool`` -- the public methods the
    SDK's ``tools/list`` and ``tools/call`` handlers delegate to -- are overridden. Results are
    built as unstructured ``CallToolResult`` objects (``structured_output=False`` behaviour).
    """

    def __init__(self, name: str, dispatcher: _Dispatcher, tools: Sequence[ToolSpec]) -> None:
        with _without_logging_side_effects():
            super().__init__(name=name, instructions=_INSTRUCTIONS, log_level="WARNING")
        self._dispatcher = dispatcher
        self._listing = [_mcp_tool(spec) for spec in tools]
        #: Set once a client (the vendor) listed the tools: its MCP handshake is complete.
        self.listed = anyio.Event()

    async def list_tools(self) -> list[MCPTool]:
        self.listed.set()
        return list(self._listing)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        gone: anyio.Event | None = None
        if context is not None:
            request = context.request_context.request
            if isinstance(request, Request):  # the HTTP request carrying the call (CapabilityGate marks it)
                marker = request.scope.get(CALLER_GONE)
                gone = marker if isinstance(marker, anyio.Event) else None
        return await self._dispatcher.call(name, arguments, gone)


# ---------------------------------------------------------------------------- embedded uvicorn

# ---------------------------------------------------------------------------- public API


class Bridge:
    """A running bridge, as yielded by :func:`open_bridge`.

    Attributes:
        identity: The run identity every call executes with.
        endpoint: What the adapter writes into the vendor's MCP configuration.
        tools: The tool specs the bridge publishes.
    """

    def __init__(
        self,
        identity: RunIdentity,
        endpoint: BridgeEndpoint,
        port: int,
        tools: tuple[ToolSpec, ...],
        done: anyio.Event,
        listed: anyio.Event,
    ) -> None:
        self.identity = identity
        self.endpoint = endpoint
        self.tools = tools
        self._port = port
        self._done = done
        self._listed = listed

    async def wait_listed(self, timeout_seconds: float) -> bool:
        """Wait until a client listed the bridge's tools (the vendor's MCP handshake is complete).

        Returns:
            True once it did, False when ``timeout_seconds`` passed first.
        """
        with anyio.move_on_after(timeout_seconds):
            await self._listed.wait()
        return self._listed.is_set()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/mcp``."""
        return self.endpoint.url

    @property
    def port(self) -> int:
        """The TCP port the bridge listens on (127.0.0.1)."""
        return self._port

    @property
    def running(self) -> bool:
        """True until the server stops (normally only when the context exits)."""
        return not self._done.is_set()

    def __repr__(self) -> str:  # never show the capability
        return f"Bridge(run_id={self.identity.run_id!r}, url={self.url!r})"


@contextlib.asynccontextmanager
async def open_bridge(
    identity: RunIdentity,
    host: ToolHost,
    tools: Sequence[ToolSpec],
    *,
    queues: WorkerQueues | None = None,
    limits: BridgeLimits | None = None,
    server_name: str = "octipus",
) -> AsyncIterator[Bridge]:
    """Run the loopback MCP bridge of one run for the duration of the ``async with`` block.

    Args:
        identity: The run's identity; the only identity calls execute with.
        host: The runtime seam (authorization, plan, context, events).
        tools: Tool specs to publish (a run's tool set, e.g. :data:`octipusd.tools.DEFAULT_TOOLS` and
            its connectors' tools; the runtime chooses it).
        queues: Registry of per-worker call locks (default: the process-wide
            :data:`octipusd.bridge.queue.DEFAULT_WORKER_QUEUES`, so every bridge of a worker
            shares one queue).
        limits: Deadlines and bounds (default :class:`BridgeLimits`).
        server_name: MCP server name (Claude shows tools as ``mcp__<server_name>__<tool>``).

    Yields:
        The running :class:`Bridge`; ``bridge.endpoint`` is the
        :class:`octipusd.adapter.BridgeEndpoint` (url ``http://127.0.0.1:<port>/mcp``, token =
        the capability, server_name).

    Raises:
        BridgeError: the port could not be bound or the server did not start within
            ``limits.startup_timeout_seconds``.
        ValueError: the tool specs are invalid (see :func:`octipusd.toolkit.validate_tool_specs`).

    On exit (normal, error or cancellation) the server stops, shielded and bounded by
    ``limits.shutdown_timeout_seconds``: queued and running calls are stopped and answer with
    an error result, open streams are ended, and the capability dies with the port (see the
    module docstring). Requires the asyncio backend (uvicorn).
    """
    specs = validate_tool_specs(tools)
    limits = limits or BridgeLimits()
    registry = queues if queues is not None else DEFAULT_WORKER_QUEUES
    capability = secrets.token_urlsafe(32)
    install_uvicorn_filter()
    try:
        sock = bind_loopback()
    except OSError as exc:
        raise BridgeError(f"cannot bind the bridge on 127.0.0.1: {exc}") from exc
    try:
        port = int(sock.getsockname()[1])
        url = f"http://127.0.0.1:{port}{MCP_PATH}"
        with registry.lease(identity.worker_id) as lock:
            dispatcher = _Dispatcher(identity, host, specs, lock, limits)
            mcp_server = _BridgeMCPServer(server_name, dispatcher, specs)
            security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}"],
                allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}"],
            )
            mcp_app = mcp_server.streamable_http_app(
                streamable_http_path=MCP_PATH,
                transport_security=security,
                session_idle_timeout=None,  # sessions live as long as the run's bridge
                max_sessions=limits.max_sessions,
            )
            gate = CapabilityGate(mcp_app, capability)
            config = EmbeddedConfig(
                gate,
                http=QuietH11Protocol,
                ws="none",
                lifespan="on",
                log_level=None,
                access_log=False,
                proxy_headers=False,
                server_header=False,
                date_header=False,
                timeout_graceful_shutdown=limits.graceful_shutdown_seconds,
            )
            server = EmbeddedServer(config)
            done = anyio.Event()
            failure: list[BaseException] = []

            async def serve() -> None:
                IN_BRIDGE_SERVER.set(True)
                try:
                    await server.serve(sockets=[sock])
                except SystemExit as exc:  # uvicorn exits the process on startup failure
                    failure.append(exc)
                except Exception as exc:  # logged, and at start-up raised as a BridgeError
                    failure.append(exc)
                    logger.exception("bridge server of run %s failed", identity.run_id)
                finally:
                    done.set()

            body_error: BaseException | None = None
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(serve)
                    try:
                        with anyio.fail_after(limits.startup_timeout_seconds):
                            # uvicorn exposes no startup event, only the ``started`` flag.
                            while not server.started and not done.is_set():  # noqa: ASYNC110
                                await anyio.sleep(_STARTUP_POLL_SECONDS)
                    except TimeoutError:
                        server.exit_now()
                        tg.cancel_scope.cancel()
                        raise BridgeError(
                            f"the bridge did not start within {limits.startup_timeout_seconds:g} s"
                        ) from None
                    if done.is_set() or failure:
                        reason = failure[0] if failure else "stopped"
                        raise BridgeError(f"the bridge failed to start: {reason}")
                    endpoint = BridgeEndpoint(
                        url=url,
                        token=capability,
                        server_name=server_name,
                        tool_timeout_seconds=limits.request_timeout_seconds + limits.vendor_grace_seconds,
                    )
                    bridge = Bridge(identity, endpoint, port, specs, done, mcp_server.listed)
                    logger.debug("bridge of run %s listening on %s", identity.run_id, url)
                    try:
                        yield bridge
                    finally:
                        with anyio.CancelScope(shield=True):
                            with anyio.move_on_after(limits.shutdown_timeout_seconds):
                                await dispatcher.close(grace_seconds=limits.drain_seconds)
                                await gate.close(grace_seconds=limits.drain_seconds)
                                server.exit_now()
                                await done.wait()
                            if not done.is_set():
                                server.exit_now()
                                logger.warning(
                                    "bridge of run %s did not stop in time; cancelling it", identity.run_id
                                )
                                tg.cancel_scope.cancel()
            except BaseExceptionGroup as group:
                # serve() raises nothing, so a group carries the exception of the caller's
                # block (or of startup): hand it back unwrapped, as the caller raised it.
                if len(group.exceptions) != 1:
                    raise
                body_error = group.exceptions[0]
            if body_error is not None:
                raise body_error
    finally:
        sock.close()
