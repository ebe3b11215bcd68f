"""The connector registry: MCP client connections to the configured servers, and their tool specs.

:class:`ConnectorRegistry` opens one MCP client session per enabled server (the ``mcp`` SDK 2.x
``ClientSession`` over ``stdio_client`` or ``streamable_http_client``), lists its tools and turns
each into a :class:`~octipusd.toolkit.ToolSpec` (see :mod:`octipusd.connectors`); it also ends
the HTTP sessions a stopped daemon left open, and gives the recovery contract of a tool when no
connection is open.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from octipusd.connectors.calls import (
    call_timeout,
    describe,
    list_tools,
    make_handler,
    max_call_timeout,
    one_line,
)
from octipusd.connectors.contracts import build_contract
from octipusd.connectors.transport import (
    MCP_SESSION_HEADER,
    Connection,
    Slot,
    TrackingWriteStream,
    pump_stderr,
    url_digest,
)
from octipusd.environment import login_environment
from octipusd.errors import ConnectorUnavailableError, NotExecutedError, NotFoundError, OctipusError
from octipusd.settings import McpServerSettings
from octipusd.toolkit import (
    RESERVED_IDENTITY_ARGUMENTS,
    RUN_MARKER,
    DispatchEnd,
    DispatchRef,
    RecoveryContract,
    ToolSpec,
)
from octipusd.toolkit.secrets import Masker, find_placeholders, substitute

if TYPE_CHECKING:
    from mcp_types import Tool as McpTool

    from octipusd.connectors.http_tracking import ConnectTrackingTransport

__all__ = ["BRIDGE_TIMEOUT_MARGIN_SECONDS", "ConnectorRegistry", "ConnectorSecrets", "ConnectorSet"]

#: ``(server, entry names) -> {name: value}``; raises an :class:`~octipusd.errors.OctipusError`
#: naming an entry it refuses.
ConnectorSecrets = Callable[[str, Sequence[str]], Awaitable[Mapping[str, str]]]

logger = logging.getLogger("octipusd.connectors")


#: Bound of one session termination (an HTTP DELETE) at restart (seconds).
TERMINATE_TIMEOUT_SECONDS = 10.0
#: After a server confirmed the end of a session, time for a call it was cancelling to unwind
#: before a probe looks (seconds).
TERMINATE_SETTLE_SECONDS = 1.0
#: Extra seconds the bridge allows a connector call beyond ``callTimeoutSeconds``.
BRIDGE_TIMEOUT_MARGIN_SECONDS = 5.0
#: Bound of closing one connection (the SDK's own stdio shutdown is shielded and bounded too).
_CLOSE_TIMEOUT_SECONDS = 8.0
#: Beyond :data:`_CLOSE_TIMEOUT_SECONDS`, how long closing a set of connections waits for every
#: holder to finish before they are cancelled (seconds).
_CLOSE_MARGIN_SECONDS = 2.0
#: How long a failed stdio server's stderr may take to reach EOF before its notice is written.
_STDERR_SETTLE_SECONDS = 0.5
#: Characters of a failed server's last stderr line quoted in its error.
_STDERR_NOTICE_CHARS = 200
#: Read timeout of an http server's connection (seconds): at least this, and always beyond the
#: longest call deadline by :data:`_HTTP_READ_MARGIN_SECONDS` (the call's own deadline decides).
_HTTP_READ_FLOOR_SECONDS = 300.0
_HTTP_READ_MARGIN_SECONDS = 30.0

# MCP tool names: 1-128 of letters, digits, "_", "-", "." (MCP-SPEC 2025-11-25 "Tool names").
_TOOL_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")

#: The MCP client modules, imported (in a worker thread, off the event loop) by the first
#: connection: the daemon's start-up does not load the MCP SDK.
_SDK_MODULES = ("mcp.client.session", "mcp.client.stdio", "mcp.client.streamable_http", "httpx2")


def _load_sdk() -> None:
    for name in _SDK_MODULES:
        importlib.import_module(name)


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


# ---------------------------------------------------------------------------- registry


class ConnectorRegistry:
    """Opens MCP client connections to the configured servers and builds their tool specs.

    Args:
        servers: Returns the current ``mcpServers`` configuration (name -> settings). Called at
            every new connection (and by :meth:`contract_for`), so an edited configuration -- e.g.
            ``trustRecoveryHints`` -- applies on the next connection (seed 000).
        secrets: Resolves the vault placeholders (``{{secret:NAME}}``) of a server's ``env`` and
            ``headers`` values, ``(server, names) -> {name: value}``, each time a connection is
            opened (None: a server that names one is left out, saying the daemon has no vault).
            The values reach that connection only, and are masked in its tools' results.
    """

    def __init__(
        self, servers: Callable[[], Mapping[str, McpServerSettings]], secrets: ConnectorSecrets | None = None
    ) -> None:
        self._servers = servers
        self._secrets = secrets

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
            yield self._build_set([Slot(server, connection.settings, connection=connection)])

    @contextlib.asynccontextmanager
    async def _open_one(self, server: str) -> AsyncIterator[Connection]:
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
    async def _open(self, configs: Mapping[str, McpServerSettings]) -> AsyncIterator[list[Slot]]:
        """Hold one connection task per server; yield once each is connected or failed."""
        slots = [Slot(name, cfg) for name, cfg in configs.items()]
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
                    with (
                        anyio.CancelScope(shield=True),
                        anyio.move_on_after(_CLOSE_TIMEOUT_SECONDS + _CLOSE_MARGIN_SECONDS),
                    ):
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

    async def _hold(self, slot: Slot, stop: anyio.Event) -> None:
        """Connect one server, keep its session open until ``stop``, then close it.

        Never raises (but for cancellation): a failure becomes ``slot.error``.
        """
        try:
            async with anyio.create_task_group() as pumps:
                try:
                    await self._hold_session(slot, stop, pumps)
                finally:
                    pumps.cancel_scope.cancel()
        except Exception as exc:  # never raises: a failure is the slot's error
            # defensive: _hold_session contains its own failures, so this one is unexpected
            logger.error("MCP server %r: the connection holder failed", slot.server, exc_info=exc)
            slot.error = slot.error or describe(exc)
        finally:
            if slot.connection is not None:
                slot.connection.closed = True
            slot.settled.set()
            slot.done.set()

    async def _hold_session(self, slot: Slot, stop: anyio.Event, pumps: anyio.abc.TaskGroup) -> None:
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
            except Exception as exc:  # a server's failure is its slot's error, never the caller's
                if slot.connection is not None:
                    logger.warning(
                        "MCP server %r: session ended with an error: %s",
                        slot.server,
                        describe(exc),
                        exc_info=exc,
                    )
                else:
                    logger.warning("MCP server %r: could not connect", slot.server, exc_info=exc)
                    failure = exc
        if slot.connection is not None:
            return
        if failure is not None:
            slot.error = describe(failure)
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
            slot.error += f" (server stderr: {one_line(tail, _STDERR_NOTICE_CHARS)})"

    async def _establish(
        self, stack: contextlib.AsyncExitStack, slot: Slot, pumps: anyio.abc.TaskGroup
    ) -> Connection:
        await anyio.to_thread.run_sync(_load_sdk)
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp_types import Implementation

        cfg = slot.settings
        env, headers, slot.masker = await self._with_secrets(slot.server, cfg)
        http: ConnectTrackingTransport | None = None
        marker: str | None = None
        if cfg.transport == "stdio":
            assert cfg.command is not None  # enforced by McpServerSettings
            marker = f"connector-{uuid.uuid4().hex}"
            # the login variables (the SDK adds only HOME, LOGNAME, PATH, SHELL, TERM, USER, which
            # are among them), then the server's own configured env
            env = {**login_environment(os.environ), **env, RUN_MARKER: marker}
            params = StdioServerParameters(command=cfg.command, args=list(cfg.args), env=env, cwd=cfg.cwd)
            read_fd, write_fd = os.pipe()
            slot.stderr_done = anyio.Event()
            pumps.start_soon(pump_stderr, read_fd, slot, slot.stderr_done)
            # The child gets its own copy of the write end; ours is closed once it is spawned, so
            # the pump sees EOF when the server (and anything it left holding stderr) is gone.
            with os.fdopen(write_fd, "w") as errlog:
                read_stream, write_stream = await stack.enter_async_context(
                    stdio_client(params, errlog=errlog)
                )
        else:
            assert cfg.url is not None  # enforced by McpServerSettings
            import httpx2

            from octipusd.connectors.http_tracking import ConnectTrackingTransport

            http = ConnectTrackingTransport(httpx2.AsyncHTTPTransport())
            client = httpx2.AsyncClient(
                headers=headers,
                timeout=httpx2.Timeout(
                    cfg.connectTimeoutSeconds,
                    read=max(_HTTP_READ_FLOOR_SECONDS, max_call_timeout(cfg) + _HTTP_READ_MARGIN_SECONDS),
                ),
                transport=http,
            )
            await stack.enter_async_context(client)
            read_stream, write_stream = await stack.enter_async_context(
                streamable_http_client(cfg.url, http_client=client)
            )
        writer = TrackingWriteStream(write_stream)
        session = await stack.enter_async_context(
            ClientSession(read_stream, writer, client_info=Implementation(name="octipus", version="0.1.0"))
        )
        await session.initialize()
        tools = await list_tools(session)
        return Connection(
            slot.server, cfg, session, writer, tuple(tools), http=http, marker=marker, masker=slot.masker
        )

    async def _with_secrets(
        self, server: str, cfg: McpServerSettings
    ) -> tuple[dict[str, str], dict[str, str], Masker]:
        """The server's ``env`` and ``headers`` with their vault placeholders resolved, and the
        masker of the values.

        Raises:
            ConnectorUnavailableError: a placeholder is outside an ``env`` or ``headers`` value, or
                an entry is refused (the message names it); the server is not started.
        """
        layout = {
            "command": cfg.command or "",
            "args": list(cfg.args),
            "cwd": cfg.cwd or "",
            "url": cfg.url or "",
            "env": {**cfg.env, **cfg.headers},
        }
        try:
            names = list(find_placeholders(f"mcpServers.{server}", layout, env_allowed=True).names)
        except NotExecutedError as exc:
            raise ConnectorUnavailableError(
                "vault placeholders go only in values of env (stdio) or headers (http) of an MCP server; "
                + exc.message
            ) from None
        if not names:
            return dict(cfg.env), dict(cfg.headers), Masker({})
        if self._secrets is None:
            raise ConnectorUnavailableError(
                f"MCP server {server!r} names vault entries in its env or headers, and this daemon has no vault"
            )
        try:
            values = await self._secrets(server, names)
        except OctipusError as exc:
            raise ConnectorUnavailableError(f"MCP server {server!r} was not started: {exc.message}") from None
        return substitute(cfg.env, values), substitute(cfg.headers, values), Masker(values)

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
        await anyio.to_thread.run_sync(_load_sdk)
        import httpx2

        try:
            _, headers, _ = await self._with_secrets(server, cfg)
        except ConnectorUnavailableError as exc:
            return DispatchEnd(
                False, one_line(f"ending session {ref.session_id} of {server!r} failed: {exc.message}")
            )
        try:
            with anyio.fail_after(TERMINATE_TIMEOUT_SECONDS):
                async with httpx2.AsyncClient(
                    headers=headers, timeout=TERMINATE_TIMEOUT_SECONDS, follow_redirects=False
                ) as client:
                    response = await client.delete(cfg.url, headers={MCP_SESSION_HEADER: ref.session_id})
        except (httpx2.HTTPError, TimeoutError) as exc:
            return DispatchEnd(
                False, one_line(f"ending session {ref.session_id} of {server!r} failed: {describe(exc)}")
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
        return build_contract(server, tool, cfg, self._open_one)

    # ------------------------------------------------------------------ specs

    def _build_set(self, slots: list[Slot]) -> ConnectorSet:
        specs: list[ToolSpec] = []
        notices: list[str] = []
        for slot in slots:
            connection = slot.connection
            if connection is None:
                error = slot.masker.mask(slot.error or "unknown error")
                notices.append(f"MCP server {slot.server!r} is unavailable: {error}")
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

    def _spec(self, connection: Connection, tool: McpTool) -> ToolSpec | str:
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
            handler=make_handler(connection, tool.name),
            read_only=read_only,
            timeout_seconds=call_timeout(connection.settings, tool.name) + BRIDGE_TIMEOUT_MARGIN_SECONDS,
            contract=None
            if read_only
            else build_contract(server, tool.name, connection.settings, self._open_one),
            identity=f"{server}.{tool.name}",
            dispatch_ref=connection.dispatch_ref,
        )
