"""One connector call: sending ``tools/call`` and classifying its outcome (seed 000).

* proven not to have reached ``tools/call`` -- the connection is closed or already broken, the
  request was refused before the transport accepted it, or (http) the TCP connection to the
  server could not be established -- raises :class:`~octipusd.toolkit.NotExecutedError`;
* a result with ``isError: false``: a plain return, i.e. ``completed``;
* ``isError: true`` carrying ``_meta["octipus/recovery"].outcome == "not_executed"`` from a
  trusted server raises ``NotExecutedError`` with the server's text; from an untrusted server the
  declaration is ignored;
* any other ``isError``, a timeout, a transport failure after the request was handed to the
  transport, or an unexpected answer: a :class:`~octipusd.toolkit.ToolOutcome` marked uncertain.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from octipusd.connectors.transport import TRACKER, CallTracker, Connection, Handoff
from octipusd.errors import OctipusError
from octipusd.settings import McpServerSettings
from octipusd.toolkit import (
    DETAIL_CHARS,
    NotExecutedError,
    RunIdentity,
    ToolHandler,
    ToolHost,
    ToolOutcome,
    ToolResult,
)
from octipusd.toolkit.secrets import mask_outcome, masking_errors

if TYPE_CHECKING:  # the MCP SDK is imported when a server is first connected (connectors.registry)
    from mcp.client.session import ClientSession
    from mcp_types import CallToolResult, Tool as McpTool

__all__ = [
    "RECOVERY_META_KEY",
    "call_timeout",
    "call_tool",
    "describe",
    "list_tools",
    "make_handler",
    "max_call_timeout",
    "one_line",
    "result_text",
]

logger = logging.getLogger("octipusd.connectors")

#: The ``_meta`` key of a server's recovery declaration (seed 000).
RECOVERY_META_KEY = "octipus/recovery"
#: Backstop beyond ``callTimeoutSeconds`` on the whole call (the SDK's read timeout starts
#: only once the request is written).
_CALL_BACKSTOP_SECONDS = 2.0
#: At most this many ``tools/list`` pages per server.
_MAX_TOOL_PAGES = 50


def one_line(text: str, limit: int = DETAIL_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    leaf = _leaf(exc)
    text = str(leaf) or type(leaf).__name__
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    if isinstance(leaf, MCPError):
        if leaf.code == CONNECTION_CLOSED:
            return "the server closed the connection"
        return one_line(f"MCP error {leaf.code}: {text}")
    return one_line(f"{type(leaf).__name__}: {text}")


async def list_tools(session: ClientSession) -> list[McpTool]:
    from mcp_types import PaginatedRequestParams

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


def result_text(result: CallToolResult) -> str:
    from mcp_types import TextContent

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


def call_timeout(cfg: McpServerSettings, tool: str) -> float:
    """The call deadline of ``tool`` (seconds): its own ``callTimeoutSeconds`` or the server's."""
    override = cfg.tools.get(tool)
    if override is not None and override.callTimeoutSeconds is not None:
        return override.callTimeoutSeconds
    return cfg.callTimeoutSeconds


def max_call_timeout(cfg: McpServerSettings) -> float:
    """The longest call deadline of any tool of the server (seconds)."""
    own = [t.callTimeoutSeconds for t in cfg.tools.values() if t.callTimeoutSeconds is not None]
    return max([cfg.callTimeoutSeconds, *own])


async def call_tool(
    connection: Connection, tool: str, arguments: dict[str, Any]
) -> tuple[CallToolResult | None, BaseException | None, CallTracker, bool]:
    """Send one ``tools/call``; return (result, failure, tracker, untracked_send).

    ``untracked_send`` is True when a ``tools/call`` went through the connection during the
    call without this call's tracker seeing it (then a failure stays uncertain).
    """
    tracker = CallTracker()
    if connection.closed:
        return None, None, tracker, False
    timeout = call_timeout(connection.settings, tool)
    sent_before = connection.writer.tools_calls
    token = TRACKER.set(tracker)
    result: CallToolResult | None = None
    failure: BaseException | None = None
    try:
        with anyio.move_on_after(timeout + _CALL_BACKSTOP_SECONDS):
            result = await connection.session.call_tool(tool, arguments, read_timeout_seconds=timeout)
        if result is None:
            failure = TimeoutError(f"no answer within {timeout:g} s")
    except Exception as exc:  # the failure is classified as the call's outcome
        logger.warning("tools/call %s on MCP server %r failed", tool, connection.server, exc_info=exc)
        failure = exc
    finally:
        TRACKER.reset(token)
    seen = connection.writer.tools_calls - sent_before
    mine = 0 if tracker.state is Handoff.PENDING else 1
    return result, failure, tracker, seen > mine


async def _invoke(connection: Connection, tool: str, arguments: dict[str, Any]) -> ToolResult | ToolOutcome:
    """Run one agent call of ``tool`` and classify its outcome (see the module docstring).

    Raises:
        NotExecutedError: the request provably never reached the server, or a trusted server
            declared that nothing ran.
    """
    server = connection.server
    tool_id = f"{server}.{tool}"
    if connection.closed:
        raise NotExecutedError(f"{tool_id} was not called: the connection to MCP server {server!r} is closed")
    result, failure, tracker, untracked = await call_tool(connection, tool, arguments)
    if result is None:
        if failure is None:  # closed between the check and the send
            raise NotExecutedError(
                f"{tool_id} was not called: the connection to MCP server {server!r} is closed"
            )
        if tracker.undelivered and not untracked:
            raise NotExecutedError(
                f"{tool_id} was not called: the request could not be sent to MCP server {server!r} "
                f"({describe(failure)}); nothing reached the server"
            ) from failure
        return _uncertain_failure(tool_id, call_timeout(connection.settings, tool), failure)
    text = result_text(result)
    if not result.is_error:
        if isinstance(result.structured_content, dict):
            return dict(result.structured_content)
        return text
    if connection.settings.trustRecoveryHints and _declares_not_executed(result):
        raise NotExecutedError(
            f"{tool_id} did not execute (declared by the trusted server): {one_line(text) or 'no details'}"
        )
    return ToolOutcome(
        text or f"{tool_id} reported an error without details",
        uncertain=f"{tool_id} reported an error; it may have acted before failing",
        is_error=True,
        detail="isError",
    )


def _uncertain_failure(tool_id: str, timeout: float, failure: BaseException) -> ToolOutcome:
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    leaf = _leaf(failure)
    if (isinstance(leaf, MCPError) and leaf.code == REQUEST_TIMEOUT) or isinstance(leaf, TimeoutError):
        message = f"{tool_id} did not answer within {timeout:g} s; it may have acted"
        uncertain = f"{tool_id} timed out after {timeout:g} s; it may have acted"
    elif isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED:
        message = f"the connection to {tool_id}'s server closed after the call was sent; it may have acted"
        uncertain = f"{tool_id}: connection lost after the call was sent"
    else:
        message = f"{tool_id} failed after the call was sent: {describe(leaf)}; it may have acted"
        uncertain = f"{tool_id}: no result after the call was sent ({type(leaf).__name__})"
    detail = type(leaf).__name__
    if isinstance(leaf, MCPError):
        detail = f"MCPError {leaf.code}"
    return ToolOutcome(message, uncertain=uncertain, is_error=True, detail=detail, in_flight=True)


def make_handler(connection: Connection, tool: str) -> ToolHandler:
    """The handler of one tool of ``connection``.

    A server started with vault values (its ``env`` or ``headers``) serves a call only when the
    call's user and tool may use every entry (:meth:`~octipusd.toolkit.ToolHost.resolve_secrets`,
    its values discarded: the connection already holds them); its result and errors are masked.

    Raises:
        NotExecutedError: an entry is refused to the call's user or tool (named); nothing was sent.
    """
    tool_id = f"{connection.server}.{tool}"

    async def handler(
        identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]
    ) -> ToolResult | ToolOutcome:
        masker = connection.masker
        if masker:
            try:
                await host.resolve_secrets(identity, tool_id, masker.names)
            except OctipusError as exc:
                raise NotExecutedError(f"{tool_id} was not called: {exc.message}") from None
        with masking_errors(masker):
            return mask_outcome(masker, await _invoke(connection, tool, dict(arguments)))

    return handler
