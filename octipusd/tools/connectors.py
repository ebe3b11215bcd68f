"""MCP connectors: external MCP servers whose tools the per-run bridge offers to agents.

The operator configures servers under ``mcpServers`` (:class:`octipusd.settings.McpServerSettings`).
:class:`ConnectorRegistry` opens one MCP client session per enabled server (the ``mcp`` SDK 2.x
``ClientSession`` over ``stdio_client`` or ``streamable_http_client``), lists its tools and turns
each into a :class:`~octipusd.tools.base.ToolSpec`:

* published name ``<server>__<tool>`` (the ``container__action`` form vendors accept), identity
  ``<server>.<tool>`` (seed 000: "New MCP journal entries identify server.tool");
* ``read_only`` only for a server with ``trustRecoveryHints = true`` whose tool carries exactly
  ``annotations.readOnlyHint: true`` (seed 000 "MCP server recovery declarations"); anything
  else, including a missing annotation or an untrusted server, is a mutation, journaled and
  gated by recovery review. Call arguments are never consulted for this;
* a recovery contract (seed 004) from the configuration: risk class (default
  ``irreversible``), owner, deadline, idempotency key, verification probe and compensation.

How a call's outcome is classified (seed 000 "Implementation and guarantees"):

* proven not to have reached ``tools/call`` -- the connection is closed or already broken, the
  request was refused before the transport accepted it, or (http) the TCP connection to the
  server could not be established -- raises :class:`~octipusd.journal.outcomes.NotExecutedError`
  ("Local bridge refusals before tools/call are also not_executed");
* a result with ``isError: false``: a plain return, i.e. ``completed``;
* ``isError: true`` carrying ``_meta["octipus/recovery"].outcome == "not_executed"`` from a
  trusted server raises ``NotExecutedError`` with the server's text; from an untrusted server the
  declaration is ignored;
* any other ``isError``, a timeout, a transport failure after the request was handed to the
  transport, or an unexpected answer: a :class:`~octipusd.journal.outcomes.ToolOutcome` marked
  uncertain ("Generic errors ... missing results and post-dispatch transport failures remain
  conservative").

Whether ``tools/call`` was handed to the transport is observed, not guessed: the session's write
stream is wrapped, and the handler's task carries a tracker (a context variable) that the wrapper
updates when it hands that request over. The SDK writes a request from the caller's task
(``JSONRPCDispatcher.send_raw_request`` -> ``_write``; mcp 2.3), and the streamable HTTP
transport runs each POST in the sender's context (``post_writer``), where an HTTP transport
wrapper notes a failed TCP connect.

Connections are opened per use (:meth:`ConnectorRegistry.connect_all` for a run's bridge,
:meth:`ConnectorRegistry.connect` for one server), and the configuration is read at every new
connection, so an edited server setting applies on the next connection (seed 000).

A stdio server starts with the login variables of the daemon's environment
(:func:`octipusd.environment.login_environment`: HOME, PATH, locale, proxies, CA bundles...) and
then its configured ``env``; never the daemon's settings, API keys or other credentials. A server
that needs a credential gets it in its ``env``, as when a vendor CLI starts it from its own config.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import logging
import math
import os
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

import anyio
import anyio.abc
import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolResult,
    Implementation,
    JSONRPCRequest,
    PaginatedRequestParams,
    TextContent,
    Tool as McpTool,
)

from octipusd.bridge.host import ToolHost
from octipusd.bridge.identity import RESERVED_IDENTITY_ARGUMENTS, RunIdentity
from octipusd.environment import login_environment
from octipusd.errors import NotFoundError, OctipusError
from octipusd.journal.contracts import (
    ActionRef,
    Compensation,
    DispatchEnd,
    DispatchKind,
    DispatchRef,
    IdempotencyKey,
    Probe,
    ProbeResult,
    ProbeStatus,
    RecoveryContract,
    RiskClass,
)
from octipusd.journal.outcomes import NotExecutedError, ToolOutcome
from octipusd.runner.process import RUN_MARKER
from octipusd.settings import IDEMPOTENCY_KEY_PLACEHOLDER, McpServerSettings, McpToolCallSettings
from octipusd.tools.base import ToolHandler, ToolResult, ToolSpec

__all__ = [
    "RECOVERY_META_KEY",
    "ConnectorCompensationError",
    "ConnectorRegistry",
    "ConnectorSet",
    "ConnectorUnavailableError",
    "url_digest",
]

logger = logging.getLogger(__name__)

#: The ``_meta`` key of a server's recovery declaration (seed 000).
RECOVERY_META_KEY = "octipus/recovery"
#: The streamable HTTP session header (MCP-SPEC 2025-11-25 "Session Management").
MCP_SESSION_HEADER = "mcp-session-id"
#: Bound of one session termination (an HTTP DELETE) at restart (seconds).
TERMINATE_TIMEOUT_SECONDS = 10.0
#: After a server confirmed the end of a session, time for a call it was cancelling to unwind
#: before a probe looks (seconds).
TERMINATE_SETTLE_SECONDS = 1.0
#: Extra seconds the bridge allows a connector call beyond ``callTimeoutSeconds``.
BRIDGE_TIMEOUT_MARGIN_SECONDS = 5.0
#: Backstop beyond ``callTimeoutSeconds`` on the whole call (the SDK's read timeout starts
#: only once the request is written).
_CALL_BACKSTOP_SECONDS = 2.0
#: Bound of closing one connection (the SDK's own stdio shutdown is shielded and bounded too).
_CLOSE_TIMEOUT_SECONDS = 8.0
#: At most this many ``tools/list`` pages per server.
_MAX_TOOL_PAGES = 50
#: Length of a one-line detail.
_DETAIL_CHARS = 300
#: Bytes of a stdio server's stderr kept (its last line is quoted when it fails to connect).
_STDERR_TAIL_BYTES = 4096
#: How long a failed stdio server's stderr may take to reach EOF before its notice is written.
_STDERR_SETTLE_SECONDS = 0.5

# MCP tool names: 1-128 of letters, digits, "_", "-", "." (MCP-SPEC 2025-11-25 "Tool names").
_TOOL_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")

_CLIENT_INFO = Implementation(name="octipus", version="0.1.0")


# ---------------------------------------------------------------------------- errors


class ConnectorUnavailableError(OctipusError):
    """An MCP server could not be connected (spawn failed, refused, handshake failed or timed out).

    The message names the server and the error.
    """

    code = "connector_unavailable"
    http_status = 503


class ConnectorCompensationError(OctipusError):
    """A configured compensation tool failed (``isError``, a transport error, no connection).

    The message names the server, the compensation tool and the evidence; the recovery worker
    hands the action to its owner.
    """

    code = "compensation_failed"
    http_status = 502


# ---------------------------------------------------------------------------- public types


@dataclass(frozen=True)
class ConnectorSet:
    """The tools of the connected MCP servers, as yielded by :meth:`ConnectorRegistry.connect_all`.

    Attributes:
        tools: One :class:`ToolSpec` per usable discovered tool, servers in configuration order.
            Their handlers call through the open connections and refuse (``NotExecutedError``)
            once the ``async with`` block has ended.
        notices: One line per server left out (naming it and the error) and per tool skipped.
    """

    tools: tuple[ToolSpec, ...]
    notices: tuple[str, ...]


# ---------------------------------------------------------------------------- dispatch tracking


class _Handoff(enum.Enum):
    PENDING = "pending"  # tools/call not yet offered to the transport
    SENDING = "sending"  # offered; the hand-over did not finish (it may have been delivered)
    REFUSED = "refused"  # provably not delivered (closed stream, failed TCP connect)
    SENT = "sent"  # the transport accepted it


@dataclass
class _CallTracker:
    state: _Handoff = _Handoff.PENDING

    @property
    def undelivered(self) -> bool:
        return self.state in (_Handoff.PENDING, _Handoff.REFUSED)


_TRACKER: ContextVar[_CallTracker | None] = ContextVar("octipus_connector_call", default=None)


def _is_tools_call(message: object) -> bool:
    return isinstance(message, JSONRPCRequest) and message.method == "tools/call"


class _SessionWriter(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...
    async def aclose(self) -> None: ...


class _TrackingWriteStream:
    """The session's write stream, noting when the current call's ``tools/call`` is handed over.

    Also counts every ``tools/call`` it forwards, so a handler can tell that a request went out
    that its tracker did not see (then it stays conservative).
    """

    def __init__(self, inner: _SessionWriter) -> None:
        self._inner = inner
        self.tools_calls = 0

    async def send(self, item: SessionMessage, /) -> None:
        if not _is_tools_call(item.message):
            await self._inner.send(item)
            return
        self.tools_calls += 1
        tracker = _TRACKER.get()
        if tracker is None or tracker.state is not _Handoff.PENDING:
            await self._inner.send(item)
            return
        tracker.state = _Handoff.SENDING
        try:
            await self._inner.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            # The transport's reader is gone (or our end closed): the item was not delivered.
            tracker.state = _Handoff.REFUSED
            raise
        tracker.state = _Handoff.SENT

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _TrackingWriteStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


class _ConnectTrackingTransport(httpx2.AsyncBaseTransport):
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
            tracker = _TRACKER.get()
            if tracker is not None and tracker.state is _Handoff.SENT and _posts_tools_call(request):
                tracker.state = _Handoff.REFUSED
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


# ---------------------------------------------------------------------------- connections


@dataclass(eq=False)
class _Connection:
    """One open client session to one server.

    ``http`` is the HTTP transport wrapper (it knows the session id); ``marker`` the
    environment marker of a stdio server's processes.
    """

    server: str
    settings: McpServerSettings
    session: ClientSession
    writer: _TrackingWriteStream
    tools: tuple[McpTool, ...]
    closed: bool = False
    http: _ConnectTrackingTransport | None = None
    marker: str | None = None

    def dispatch_ref(self) -> DispatchRef | None:
        """Where a call made now goes (recorded with its ``started``)."""
        if self.http is not None:
            return DispatchRef(
                DispatchKind.MCP_HTTP,
                self.server,
                session_id=self.http.session_id,
                url_sha256=url_digest(self.settings.url or ""),
            )
        if self.marker is not None:
            return DispatchRef(DispatchKind.MCP_STDIO, self.server, marker=self.marker)
        return None


@dataclass(eq=False)
class _Slot:
    """A server being connected by its holder task."""

    server: str
    settings: McpServerSettings
    connection: _Connection | None = None
    error: str | None = None
    stderr: bytes = b""  # the last _STDERR_TAIL_BYTES of a stdio server's stderr
    stderr_done: anyio.Event | None = None
    settled: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)

    def stderr_tail(self) -> str:
        """The last non-empty line the server wrote to stderr ('' if none)."""
        lines = [line.strip() for line in self.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1] if lines else ""


async def _pump_stderr(fd: int, slot: _Slot, done: anyio.Event) -> None:
    """Read a stdio server's stderr pipe until EOF, keeping a bounded tail (and logging it)."""
    os.set_blocking(fd, False)
    pending = b""
    try:
        while True:
            await anyio.wait_readable(fd)
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not data:
                break
            slot.stderr = (slot.stderr + data)[-_STDERR_TAIL_BYTES:]
            pending += data
            *lines, pending = pending.split(b"\n")
            pending = pending[-_STDERR_TAIL_BYTES:]
            for line in lines:
                logger.debug("MCP server %r stderr: %s", slot.server, line.decode("utf-8", "replace"))
    except Exception as exc:  # a broken pipe must not take the connection down
        logger.debug("MCP server %r: stderr pump stopped: %r", slot.server, exc)
    finally:
        os.close(fd)
        done.set()


def _one_line(text: str, limit: int = _DETAIL_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    leaf = _leaf(exc)
    text = str(leaf) or type(leaf).__name__
    if isinstance(leaf, MCPError):
        if leaf.code == CONNECTION_CLOSED:
            return "the server closed the connection"
        return _one_line(f"MCP error {leaf.code}: {text}")
    return _one_line(f"{type(leaf).__name__}: {text}")


async def _list_tools(session: ClientSession) -> list[McpTool]:
    tools: list[McpTool] = []
    cursor: str | None = None
    for _ in range(_MAX_TOOL_PAGES):
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await session.list_tools(params=params)
        tools.extend(result.tools)
        cursor = result.next_cursor
        if not cursor:
            break
    return tools


def _result_text(result: CallToolResult) -> str:
    parts = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        else:
            parts.append(f"[{block.type} content omitted]")
    return "\n".join(parts)


def _declares_not_executed(result: CallToolResult) -> bool:
    meta = result.meta
    if not isinstance(meta, Mapping):
        return False
    declaration = meta.get(RECOVERY_META_KEY)
    return isinstance(declaration, Mapping) and declaration.get("outcome") == "not_executed"


# ---------------------------------------------------------------------------- calls


def url_digest(url: str) -> str:
    """SHA-256 (hex) of a server URL, recorded instead of the URL (which may hold a credential)."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()


def _call_timeout(cfg: McpServerSettings, tool: str) -> float:
    """The call deadline of ``tool`` (seconds): its own ``callTimeoutSeconds`` or the server's."""
    override = cfg.tools.get(tool)
    if override is not None and override.callTimeoutSeconds is not None:
        return override.callTimeoutSeconds
    return cfg.callTimeoutSeconds


def _max_call_timeout(cfg: McpServerSettings) -> float:
    """The longest call deadline of any tool of the server (seconds)."""
    own = [t.callTimeoutSeconds for t in cfg.tools.values() if t.callTimeoutSeconds is not None]
    return max([cfg.callTimeoutSeconds, *own])


async def _call(
    connection: _Connection, tool: str, arguments: dict[str, Any]
) -> tuple[CallToolResult | None, BaseException | None, _CallTracker, bool]:
    """Send one ``tools/call``; return (result, failure, tracker, untracked_send).

    ``untracked_send`` is True when a ``tools/call`` went through the connection during the
    call without this call's tracker seeing it (then a failure stays uncertain).
    """
    tracker = _CallTracker()
    if connection.closed:
        return None, None, tracker, False
    timeout = _call_timeout(connection.settings, tool)
    sent_before = connection.writer.tools_calls
    token = _TRACKER.set(tracker)
    result: CallToolResult | None = None
    failure: BaseException | None = None
    try:
        with anyio.move_on_after(timeout + _CALL_BACKSTOP_SECONDS):
            result = await connection.session.call_tool(tool, arguments, read_timeout_seconds=timeout)
        if result is None:
            failure = TimeoutError(f"no answer within {timeout:g} s")
    except Exception as exc:
        failure = exc
    finally:
        _TRACKER.reset(token)
    seen = connection.writer.tools_calls - sent_before
    mine = 0 if tracker.state is _Handoff.PENDING else 1
    return result, failure, tracker, seen > mine


async def _invoke(connection: _Connection, tool: str, arguments: dict[str, Any]) -> ToolResult | ToolOutcome:
    """Run one agent call of ``tool`` and classify its outcome (see the module docstring).

    Raises:
        NotExecutedError: the request provably never reached the server, or a trusted server
            declared that nothing ran.
    """
    server = connection.server
    tool_id = f"{server}.{tool}"
    if connection.closed:
        raise NotExecutedError(f"{tool_id} was not called: the connection to MCP server {server!r} is closed")
    result, failure, tracker, untracked = await _call(connection, tool, arguments)
    if result is None:
        if failure is None:  # closed between the check and the send
            raise NotExecutedError(
                f"{tool_id} was not called: the connection to MCP server {server!r} is closed"
            )
        if tracker.undelivered and not untracked:
            raise NotExecutedError(
                f"{tool_id} was not called: the request could not be sent to MCP server {server!r} "
                f"({_describe(failure)}); nothing reached the server"
            ) from failure
        return _uncertain_failure(tool_id, _call_timeout(connection.settings, tool), failure)
    text = _result_text(result)
    if not result.is_error:
        if isinstance(result.structured_content, dict):
            return dict(result.structured_content)
        return text
    if connection.settings.trustRecoveryHints and _declares_not_executed(result):
        raise NotExecutedError(
            f"{tool_id} did not execute (declared by the trusted server): {_one_line(text) or 'no details'}"
        )
    return ToolOutcome(
        text or f"{tool_id} reported an error without details",
        uncertain=f"{tool_id} reported an error; it may have acted before failing",
        is_error=True,
        detail="isError",
    )


def _uncertain_failure(tool_id: str, timeout: float, failure: BaseException) -> ToolOutcome:
    leaf = _leaf(failure)
    if (isinstance(leaf, MCPError) and leaf.code == REQUEST_TIMEOUT) or isinstance(leaf, TimeoutError):
        message = f"{tool_id} did not answer within {timeout:g} s; it may have acted"
        uncertain = f"{tool_id} timed out after {timeout:g} s; it may have acted"
    elif isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED:
        message = f"the connection to {tool_id}'s server closed after the call was sent; it may have acted"
        uncertain = f"{tool_id}: connection lost after the call was sent"
    else:
        message = f"{tool_id} failed after the call was sent: {_describe(leaf)}; it may have acted"
        uncertain = f"{tool_id}: no result after the call was sent ({type(leaf).__name__})"
    detail = type(leaf).__name__
    if isinstance(leaf, MCPError):
        detail = f"MCPError {leaf.code}"
    return ToolOutcome(message, uncertain=uncertain, is_error=True, detail=detail, in_flight=True)


def _make_handler(connection: _Connection, tool: str) -> ToolHandler:
    async def handler(
        identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]
    ) -> ToolResult | ToolOutcome:
        return await _invoke(connection, tool, dict(arguments))

    return handler


# ---------------------------------------------------------------------------- contracts


class _MissingKey(Exception):
    pass


def _substitute(value: Any, key: str | None) -> Any:
    if isinstance(value, str):
        if value == IDEMPOTENCY_KEY_PLACEHOLDER:
            if key is None:
                raise _MissingKey
            return key
        return value
    if isinstance(value, Mapping):
        return {k: _substitute(v, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, key) for v in value]
    return value


def _key_reader(argument: str) -> IdempotencyKey:
    def key_of(arguments: Mapping[str, Any]) -> str | None:
        value = arguments.get(argument)
        return value if isinstance(value, str) and value.strip() else None

    return key_of


def _probe_answer(ref: str, result: CallToolResult) -> ProbeResult:
    text = _result_text(result)
    if result.is_error:
        return ProbeResult(
            ProbeStatus.UNKNOWN, _one_line(f"probe {ref} reported an error: {text or 'no details'}")
        )
    data: Any = result.structured_content
    if not isinstance(data, dict):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
    if not isinstance(data, dict):
        return ProbeResult(ProbeStatus.UNKNOWN, _one_line(f"probe {ref} answered no JSON object: {text}"))
    status = data.get("status")
    if status == "applied":
        return ProbeResult(ProbeStatus.APPLIED, f"probe {ref}: applied")
    if status == "not_applied":
        return ProbeResult(ProbeStatus.NOT_APPLIED, f"probe {ref}: not applied")
    return ProbeResult(ProbeStatus.UNKNOWN, _one_line(f"probe {ref} answered status {status!r}"))


# ---------------------------------------------------------------------------- registry


class ConnectorRegistry:
    """Opens MCP client connections to the configured servers and builds their tool specs.

    Args:
        servers: Returns the current ``mcpServers`` configuration (name -> settings). Called at
            every new connection (and by :meth:`contract_for`), so an edited configuration -- e.g.
            ``trustRecoveryHints`` -- applies on the next connection (seed 000).
    """

    def __init__(self, servers: Callable[[], Mapping[str, McpServerSettings]]) -> None:
        self._servers = servers

    # ------------------------------------------------------------------ connecting

    @contextlib.asynccontextmanager
    async def connect_all(self) -> AsyncIterator[ConnectorSet]:
        """Connect every enabled server for the duration of the ``async with`` block.

        Servers are connected concurrently, each bounded by its ``connectTimeoutSeconds``
        (spawn or HTTP connect, the MCP handshake and the tool listing). A server that fails is
        left out and reported in :attr:`ConnectorSet.notices`; it never fails the set.

        Yields:
            The :class:`ConnectorSet` of the connected servers' tools.

        On exit (normal, error or cancellation) every session is closed, shielded and bounded;
        tool handlers then refuse with ``NotExecutedError``. An exception raised in the caller's
        block propagates unchanged.
        """
        configured = dict(self._servers())
        enabled = {name: cfg for name, cfg in configured.items() if cfg.enabled}
        async with self._open(enabled) as slots:
            yield self._build_set(slots)

    @contextlib.asynccontextmanager
    async def connect(self, server: str) -> AsyncIterator[ConnectorSet]:
        """Connect one server for the duration of the ``async with`` block.

        Args:
            server: The server's name in ``mcpServers``.

        Yields:
            A :class:`ConnectorSet` holding that server's tools (its notices list skipped tools).

        Raises:
            NotFoundError: the server is not configured or is disabled.
            ConnectorUnavailableError: it could not be connected within ``connectTimeoutSeconds``;
                the message names the server and the error.
        """
        async with self._open_one(server) as connection:
            yield self._build_set([_Slot(server, connection.settings, connection=connection)])

    @contextlib.asynccontextmanager
    async def _open_one(self, server: str) -> AsyncIterator[_Connection]:
        cfg = dict(self._servers()).get(server)
        if cfg is None:
            raise NotFoundError(f"MCP server {server!r} is not configured (see mcpServers in the settings)")
        if not cfg.enabled:
            raise NotFoundError(f"MCP server {server!r} is disabled (mcpServers.{server}.enabled = false)")
        async with self._open({server: cfg}) as slots:
            slot = slots[0]
            if slot.connection is None:
                raise ConnectorUnavailableError(f"MCP server {server!r} is unavailable: {slot.error}")
            yield slot.connection

    @contextlib.asynccontextmanager
    async def _open(self, configs: Mapping[str, McpServerSettings]) -> AsyncIterator[list[_Slot]]:
        """Hold one connection task per server; yield once each is connected or failed."""
        slots = [_Slot(name, cfg) for name, cfg in configs.items()]
        if not slots:
            yield slots
            return
        stop = anyio.Event()
        body_error: BaseException | None = None
        try:
            async with anyio.create_task_group() as tg:
                for slot in slots:
                    tg.start_soon(self._hold, slot, stop)
                try:
                    for slot in slots:
                        await slot.settled.wait()
                    yield slots
                finally:
                    stop.set()
                    with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT_SECONDS + 2):
                        for slot in slots:
                            await slot.done.wait()
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The holders raise nothing: a group carries the caller's exception; hand it back as
            # raised (a single exception, not a group).
            if len(group.exceptions) != 1:
                raise
            body_error = group.exceptions[0]
        if body_error is not None:
            raise body_error

    async def _hold(self, slot: _Slot, stop: anyio.Event) -> None:
        """Connect one server, keep its session open until ``stop``, then close it.

        Never raises (but for cancellation): a failure becomes ``slot.error``.
        """
        try:
            async with anyio.create_task_group() as pumps:
                try:
                    await self._hold_session(slot, stop, pumps)
                finally:
                    pumps.cancel_scope.cancel()
        except Exception as exc:  # defensive: _hold_session contains its own failures
            slot.error = slot.error or _describe(exc)
        finally:
            if slot.connection is not None:
                slot.connection.closed = True
            slot.settled.set()
            slot.done.set()

    async def _hold_session(self, slot: _Slot, stop: anyio.Event, pumps: anyio.abc.TaskGroup) -> None:
        cfg = slot.settings
        failure: BaseException | None = None
        with anyio.CancelScope(deadline=anyio.current_time() + cfg.connectTimeoutSeconds) as scope:
            try:
                async with contextlib.AsyncExitStack() as stack:
                    connection = await self._establish(stack, slot, pumps)
                    scope.deadline = math.inf
                    slot.connection = connection
                    slot.settled.set()
                    try:
                        await stop.wait()
                    finally:
                        connection.closed = True
                        scope.deadline = anyio.current_time() + _CLOSE_TIMEOUT_SECONDS
            except Exception as exc:
                if slot.connection is not None:
                    logger.warning(
                        "MCP server %r: session ended with an error: %s", slot.server, _describe(exc)
                    )
                else:
                    failure = exc
        if slot.connection is not None:
            return
        if failure is not None:
            slot.error = _describe(failure)
        elif scope.cancelled_caught:
            slot.error = f"did not connect within {cfg.connectTimeoutSeconds:g} s"
        else:
            slot.error = "the connection ended before it was established"
        if slot.stderr_done is not None:
            # The server has exited (or was stopped): let the pump take in its last words.
            with anyio.move_on_after(_STDERR_SETTLE_SECONDS):
                await slot.stderr_done.wait()
        tail = slot.stderr_tail()
        if tail and tail not in slot.error:
            slot.error += f" (server stderr: {_one_line(tail, 200)})"

    async def _establish(
        self, stack: contextlib.AsyncExitStack, slot: _Slot, pumps: anyio.abc.TaskGroup
    ) -> _Connection:
        cfg = slot.settings
        http: _ConnectTrackingTransport | None = None
        marker: str | None = None
        if cfg.transport == "stdio":
            assert cfg.command is not None  # enforced by McpServerSettings
            marker = f"connector-{uuid.uuid4().hex}"
            # the login variables (the SDK adds only HOME, LOGNAME, PATH, SHELL, TERM, USER, which
            # are among them), then the server's own configured env
            env = {**login_environment(os.environ), **cfg.env, RUN_MARKER: marker}
            params = StdioServerParameters(command=cfg.command, args=list(cfg.args), env=env, cwd=cfg.cwd)
            read_fd, write_fd = os.pipe()
            slot.stderr_done = anyio.Event()
            pumps.start_soon(_pump_stderr, read_fd, slot, slot.stderr_done)
            # The child gets its own copy of the write end; ours is closed once it is spawned, so
            # the pump sees EOF when the server (and anything it left holding stderr) is gone.
            with os.fdopen(write_fd, "w") as errlog:
                read_stream, write_stream = await stack.enter_async_context(
                    stdio_client(params, errlog=errlog)
                )
        else:
            assert cfg.url is not None  # enforced by McpServerSettings
            http = _ConnectTrackingTransport(httpx2.AsyncHTTPTransport())
            client = httpx2.AsyncClient(
                headers=dict(cfg.headers),
                timeout=httpx2.Timeout(
                    cfg.connectTimeoutSeconds, read=max(300.0, _max_call_timeout(cfg) + 30.0)
                ),
                transport=http,
            )
            await stack.enter_async_context(client)
            read_stream, write_stream = await stack.enter_async_context(
                streamable_http_client(cfg.url, http_client=client)
            )
        writer = _TrackingWriteStream(write_stream)
        session = await stack.enter_async_context(
            ClientSession(read_stream, writer, client_info=_CLIENT_INFO)
        )
        await session.initialize()
        tools = await _list_tools(session)
        return _Connection(slot.server, cfg, session, writer, tuple(tools), http=http, marker=marker)

    # ------------------------------------------------------------------ ending a stopped daemon's sessions

    def cancels_on_termination(self, server: str) -> bool:
        """True when the configured ``server`` declares ``terminationCancelsCalls``."""
        cfg = dict(self._servers()).get(server)
        return cfg is not None and cfg.terminationCancelsCalls

    async def terminate_session(self, server: str, ref: DispatchRef) -> DispatchEnd:
        """End a streamable HTTP session a stopped daemon left open (an HTTP ``DELETE``).

        The request goes to the server's configured URL with its configured headers, only when
        that URL is the one the session was opened on. An answer of 200/202/204 (the session
        was ended) or 404 (the server no longer knows it: it was ended, or the server restarted)
        ends the session's calls only for a server that declares ``terminationCancelsCalls``;
        then this waits :data:`TERMINATE_SETTLE_SECONDS` for a cancelled call to unwind (the MCP
        Python SDK answers the ``DELETE`` before the call it cancels has unwound). 405 means the
        server does not end sessions on request. The whole request is bounded by
        :data:`TERMINATE_TIMEOUT_SECONDS`.

        Args:
            server: The server's name in ``mcpServers``.
            ref: The recorded dispatch (its session id and URL digest).

        Returns:
            Whether no request of that session can land any more, and the evidence. Never
            raises for a failed request (the evidence says what failed).
        """
        cfg = dict(self._servers()).get(server)
        if cfg is None or cfg.transport != "http" or cfg.url is None:
            return DispatchEnd(
                False, f"MCP server {server!r} is no longer configured for http; session not ended"
            )
        if ref.session_id is None:
            return DispatchEnd(False, f"MCP server {server!r} gave no session id; there is no session to end")
        if ref.url_sha256 != url_digest(cfg.url):
            return DispatchEnd(
                False,
                f"MCP server {server!r} is configured with another URL now; session {ref.session_id} not ended",
            )
        try:
            with anyio.fail_after(TERMINATE_TIMEOUT_SECONDS):
                async with httpx2.AsyncClient(
                    headers=dict(cfg.headers), timeout=TERMINATE_TIMEOUT_SECONDS, follow_redirects=False
                ) as client:
                    response = await client.delete(cfg.url, headers={MCP_SESSION_HEADER: ref.session_id})
        except (httpx2.HTTPError, TimeoutError) as exc:
            return DispatchEnd(
                False, _one_line(f"ending session {ref.session_id} of {server!r} failed: {_describe(exc)}")
            )
        return await self._termination_answer(cfg, server, ref.session_id, response.status_code)

    @staticmethod
    async def _termination_answer(
        cfg: McpServerSettings, server: str, session_id: str, status: int
    ) -> DispatchEnd:
        """What a server's answer to ending a session establishes (see :meth:`terminate_session`)."""
        gone = status in (200, 202, 204, 404)
        if status in (200, 202, 204):
            evidence = f"MCP server {server!r} ended session {session_id} (HTTP {status})"
        elif status == 404:
            evidence = f"MCP server {server!r} no longer knows session {session_id} (HTTP 404)"
        elif status == 405:
            evidence = f"MCP server {server!r} does not end sessions on request (HTTP 405)"
        else:
            evidence = f"MCP server {server!r} answered HTTP {status} to ending session {session_id}"
        if gone and not cfg.terminationCancelsCalls:
            evidence += (
                "; it does not declare terminationCancelsCalls, so a call it was running may still land"
            )
        ended = gone and cfg.terminationCancelsCalls
        if ended:
            await anyio.sleep(TERMINATE_SETTLE_SECONDS)
        return DispatchEnd(ended, evidence)

    # ------------------------------------------------------------------ contracts

    def contract_for(self, tool_id: str) -> RecoveryContract | None:
        """Return the recovery contract of ``server.tool`` from the current configuration.

        Used when no connection is open (e.g. by the recovery worker after a restart). The
        contract's probe and compensation open their own short-lived connection
        (:meth:`connect`) when run.

        Args:
            tool_id: The journal identity ``<server>.<tool>``.

        Returns:
            The contract, or None when ``tool_id`` is not of that form or the server is not
            configured (the caller then treats the action as undeclared).
        """
        server, dot, tool = tool_id.partition(".")
        if not dot or not server or not tool:
            return None
        cfg = dict(self._servers()).get(server)
        if cfg is None:
            return None
        return self._contract(server, tool, cfg)

    def _contract(self, server: str, tool: str, cfg: McpServerSettings) -> RecoveryContract:
        override = cfg.tools.get(tool)
        risk = cfg.riskClass
        owner = cfg.owner
        deadline = cfg.deadlineSeconds
        key: IdempotencyKey | None = None
        probe: Probe | None = None
        compensation: Compensation | None = None
        if override is not None:
            risk = override.riskClass or risk
            owner = override.owner or owner
            deadline = override.deadlineSeconds or deadline
            if override.idempotencyKey is not None:
                key = _key_reader(override.idempotencyKey)
            if override.probe is not None:
                probe = self._make_probe(server, override.probe)
            if override.compensation is not None:
                compensation = self._make_compensation(server, override.compensation)
        return RecoveryContract(
            RiskClass(risk),
            idempotency_key=key,
            probe=probe,
            compensation=compensation,
            owner=owner,
            deadline_seconds=deadline,
            intended_effects=f"effects of MCP tool {server}.{tool} (declared by that server)",
        )

    def _make_probe(self, server: str, call: McpToolCallSettings) -> Probe:
        async def probe(action: ActionRef) -> ProbeResult:
            return await self._probe(server, call, action)

        return probe

    def _make_compensation(self, server: str, call: McpToolCallSettings) -> Compensation:
        async def compensate(action: ActionRef) -> str:
            return await self._compensate(server, call, action)

        return compensate

    async def _probe(self, server: str, call: McpToolCallSettings, action: ActionRef) -> ProbeResult:
        """Run a verification probe; every failure is ``unknown``, never ``not_applied``."""
        ref = f"{server}.{call.tool}"
        try:
            arguments = _substitute(call.arguments, action.idempotency_key)
        except _MissingKey:
            return ProbeResult(
                ProbeStatus.UNKNOWN, f"probe {ref} needs the action's idempotency key; none was recorded"
            )
        try:
            async with self._open_one(server) as connection:
                result, failure, _, _ = await _call(connection, call.tool, arguments)
        except Exception as exc:
            return ProbeResult(ProbeStatus.UNKNOWN, _one_line(f"probe {ref} could not run: {_describe(exc)}"))
        if result is None:
            reason = _describe(failure) if failure is not None else "connection closed"
            return ProbeResult(ProbeStatus.UNKNOWN, _one_line(f"probe {ref} failed: {reason}"))
        return _probe_answer(ref, result)

    async def _compensate(self, server: str, call: McpToolCallSettings, action: ActionRef) -> str:
        """Run a compensation; raise :class:`ConnectorCompensationError` unless it succeeded."""
        ref = f"{server}.{call.tool}"
        try:
            arguments = _substitute(call.arguments, action.idempotency_key)
        except _MissingKey:
            raise ConnectorCompensationError(
                f"compensation {ref} needs the action's idempotency key; none was recorded"
            ) from None
        try:
            async with self._open_one(server) as connection:
                result, failure, _, _ = await _call(connection, call.tool, arguments)
        except Exception as exc:
            raise ConnectorCompensationError(
                _one_line(f"compensation {ref} could not run: {_describe(exc)}")
            ) from exc
        if result is None:
            reason = _describe(failure) if failure is not None else "connection closed"
            raise ConnectorCompensationError(_one_line(f"compensation {ref} failed: {reason}"))
        text = _result_text(result)
        if result.is_error:
            raise ConnectorCompensationError(
                _one_line(f"compensation {ref} reported an error: {text or 'no details'}")
            )
        return _one_line(f"compensation {ref} succeeded: {text}")

    # ------------------------------------------------------------------ specs

    def _build_set(self, slots: list[_Slot]) -> ConnectorSet:
        specs: list[ToolSpec] = []
        notices: list[str] = []
        for slot in slots:
            connection = slot.connection
            if connection is None:
                notices.append(f"MCP server {slot.server!r} is unavailable: {slot.error or 'unknown error'}")
                continue
            seen: set[str] = set()
            for tool in connection.tools:
                if tool.name in seen:
                    notices.append(f"MCP server {slot.server!r}: duplicate tool {tool.name!r} skipped")
                    continue
                seen.add(tool.name)
                built = self._spec(connection, tool)
                if isinstance(built, str):
                    notices.append(built)
                else:
                    specs.append(built)
        return ConnectorSet(tools=tuple(specs), notices=tuple(notices))

    def _spec(self, connection: _Connection, tool: McpTool) -> ToolSpec | str:
        """Return the tool's spec, or a notice saying why it is skipped."""
        server = connection.server
        name = f"{server}__{tool.name}"
        if not tool.name or len(name) > 128 or not set(name) <= _TOOL_NAME_CHARS:
            return (
                f"MCP server {server!r}: tool {tool.name!r} skipped: {name!r} is not a valid tool name "
                "(1-128 letters, digits, '_', '-' or '.')"
            )
        schema: dict[str, Any] = {"type": "object"}
        if isinstance(tool.input_schema, dict) and tool.input_schema.get("type") == "object":
            schema = dict(tool.input_schema)
        properties = schema.get("properties")
        clash = (
            sorted(RESERVED_IDENTITY_ARGUMENTS.intersection(properties))
            if isinstance(properties, dict)
            else []
        )
        if clash:
            return (
                f"MCP server {server!r}: tool {tool.name!r} skipped: its arguments {clash} are reserved for "
                "the run identity, which the bridge never takes from arguments"
            )
        trusted = connection.settings.trustRecoveryHints
        read_only = trusted and tool.annotations is not None and tool.annotations.read_only_hint is True
        return ToolSpec(
            name=name,
            description=tool.description or f"Tool {tool.name} of MCP server {server}.",
            input_schema=schema,
            handler=_make_handler(connection, tool.name),
            read_only=read_only,
            timeout_seconds=_call_timeout(connection.settings, tool.name) + BRIDGE_TIMEOUT_MARGIN_SECONDS,
            contract=None if read_only else self._contract(server, tool.name, connection.settings),
            identity=f"{server}.{tool.name}",
            dispatch_ref=connection.dispatch_ref,
        )
