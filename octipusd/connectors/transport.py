"""The transport half of an MCP connector: connections and observing the ``tools/call`` hand-over.

Whether ``tools/call`` was handed to the transport is observed, not guessed: the session's write
stream is wrapped (:class:`TrackingWriteStream`), and the handler's task carries a tracker (the
context variable :data:`TRACKER`) that the wrapper updates when it hands that request over. The
SDK writes a request from the caller's task (``JSONRPCDispatcher.send_raw_request`` -> ``_write``;
mcp 2.3), and the streamable HTTP transport runs each POST in the sender's context
(``post_writer``), where the HTTP transport wrapper
(:class:`~octipusd.connectors.http_tracking.ConnectTrackingTransport`) notes a failed TCP connect
and the server's session id.

Nothing here imports the MCP SDK or httpx2 at import time (the daemon's start-up does not need
them): they are loaded when a server is first connected.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import os
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.abc

from octipusd.settings import McpServerSettings
from octipusd.toolkit import DispatchKind, DispatchRef
from octipusd.toolkit.secrets import Masker

if TYPE_CHECKING:  # the MCP SDK is imported when a server is first connected
    from mcp.client.session import ClientSession
    from mcp.shared.message import SessionMessage
    from mcp_types import Tool as McpTool

    from octipusd.connectors.http_tracking import ConnectTrackingTransport

__all__ = [
    "MCP_SESSION_HEADER",
    "TRACKER",
    "CallTracker",
    "Connection",
    "Handoff",
    "Slot",
    "TrackingWriteStream",
    "pump_stderr",
    "url_digest",
]

logger = logging.getLogger("octipusd.connectors")


#: The streamable HTTP session header (MCP-SPEC 2025-11-25 "Session Management").
MCP_SESSION_HEADER = "mcp-session-id"
#: Bytes of a stdio server's stderr kept (its last line is quoted when it fails to connect).
STDERR_TAIL_BYTES = 4096
#: Bytes read from a stdio server's stderr pipe at a time.
_READ_CHUNK_BYTES = 65536


def url_digest(url: str) -> str:
    """SHA-256 (hex) of a server URL, recorded instead of the URL (which may hold a credential)."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------- dispatch tracking


class Handoff(enum.Enum):
    PENDING = "pending"  # tools/call not yet offered to the transport
    SENDING = "sending"  # offered; the hand-over did not finish (it may have been delivered)
    REFUSED = "refused"  # provably not delivered (closed stream, failed TCP connect)
    SENT = "sent"  # the transport accepted it


@dataclass
class CallTracker:
    state: Handoff = Handoff.PENDING

    @property
    def undelivered(self) -> bool:
        return self.state in (Handoff.PENDING, Handoff.REFUSED)


TRACKER: ContextVar[CallTracker | None] = ContextVar("octipus_connector_call", default=None)


def _is_tools_call(message: object) -> bool:
    from mcp_types import JSONRPCRequest  # loaded with the session that sends the message

    return isinstance(message, JSONRPCRequest) and message.method == "tools/call"


class _SessionWriter(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...
    async def aclose(self) -> None: ...


class TrackingWriteStream:
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
        tracker = TRACKER.get()
        if tracker is None or tracker.state is not Handoff.PENDING:
            await self._inner.send(item)
            return
        tracker.state = Handoff.SENDING
        try:
            await self._inner.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            # The transport's reader is gone (or our end closed): the item was not delivered.
            tracker.state = Handoff.REFUSED
            raise
        tracker.state = Handoff.SENT

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> TrackingWriteStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


# ---------------------------------------------------------------------------- connections


@dataclass(eq=False)
class Connection:
    """One open client session to one server.

    ``http`` is the HTTP transport wrapper (it knows the session id); ``marker`` the
    environment marker of a stdio server's processes.
    """

    server: str
    settings: McpServerSettings
    session: ClientSession
    writer: TrackingWriteStream
    tools: tuple[McpTool, ...]
    closed: bool = False
    http: ConnectTrackingTransport | None = None
    marker: str | None = None
    masker: Masker = field(default_factory=lambda: Masker({}))

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
class Slot:
    """A server being connected by its holder task."""

    server: str
    settings: McpServerSettings
    connection: Connection | None = None
    error: str | None = None
    stderr: bytes = b""  # the last STDERR_TAIL_BYTES of a stdio server's stderr
    stderr_done: anyio.Event | None = None
    settled: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    masker: Masker = field(default_factory=lambda: Masker({}))

    def stderr_tail(self) -> str:
        """The last non-empty line the server wrote to stderr ('' if none)."""
        lines = [line.strip() for line in self.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1] if lines else ""


async def pump_stderr(fd: int, slot: Slot, done: anyio.Event) -> None:
    """Read a stdio server's stderr pipe until EOF, keeping a bounded tail (and logging it)."""
    os.set_blocking(fd, False)
    pending = b""
    try:
        while True:
            await anyio.wait_readable(fd)
            try:
                data = os.read(fd, _READ_CHUNK_BYTES)
            except BlockingIOError:
                continue
            if not data:
                break
            slot.stderr = (slot.stderr + data)[-STDERR_TAIL_BYTES:]
            pending += data
            *lines, pending = pending.split(b"\n")
            pending = pending[-STDERR_TAIL_BYTES:]
            for line in lines:
                logger.debug("MCP server %r stderr: %s", slot.server, line.decode("utf-8", "replace"))
    except (OSError, anyio.ClosedResourceError) as exc:  # a broken pipe must not take the connection down
        logger.debug("MCP server %r: stderr pump stopped: %r", slot.server, exc)
    finally:
        os.close(fd)
        done.set()
