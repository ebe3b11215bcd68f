"""The typed vendor events an adapter's parser emits (part of the adapter protocol, re-exported by
:mod:`octipusd.adapter`): :class:`EventKind`, :class:`VendorEvent` and its kinds, and :class:`Usage`.

Every event keeps the vendor line's decoded object as ``raw``; unknown fields are kept, unknown
event types become :class:`UnknownEvent`, a line that is not JSON an :class:`UnparsedLine`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

__all__ = [
    "JSON",
    "ControlCancelEvent",
    "ErrorEvent",
    "EventKind",
    "PermissionRequestEvent",
    "ResultEvent",
    "RunFailureEvent",
    "SessionEvent",
    "StatusEvent",
    "StdinWriteEvent",
    "SteeringAckEvent",
    "TextEvent",
    "ThinkingEvent",
    "ToolResultEvent",
    "ToolUseEvent",
    "UnknownEvent",
    "UnparsedLine",
    "Usage",
    "UsageEvent",
    "VendorEvent",
]

JSON = dict[str, Any]


class EventKind(enum.StrEnum):
    """Kinds of typed vendor events (the ``kind`` of a stored run event)."""

    SESSION = "session"
    TEXT = "text"
    THINKING = "thinking"
    TOOL_USE = "tool_use"
    TOOL_RESULT = "tool_result"
    PERMISSION_REQUEST = "permission_request"
    CONTROL_CANCEL = "control_cancel"
    USAGE = "usage"
    RESULT = "result"
    ERROR = "error"
    STATUS = "status"
    STDIN_WRITE = "stdin_write"
    RUN_FAILURE = "run_failure"
    STEERING_DELIVERED = "steering_delivered"
    STEERING_REFUSED = "steering_refused"
    UNKNOWN = "unknown"
    UNPARSED = "unparsed"


@dataclass(frozen=True)
class VendorEvent:
    """Base of every parsed event.

    Attributes:
        raw: The vendor's JSON object as received (None for unparsed lines).
    """

    raw: JSON | None

    @property
    def kind(self) -> EventKind:
        """The event's kind (stable, stored with the event)."""
        raise NotImplementedError


@dataclass(frozen=True)
class SessionEvent(VendorEvent):
    """The vendor announced its session (Claude ``system/init``).

    Attributes:
        session_id: The vendor conversation id.
        model: The model the vendor reports, if any.
        tools: Tool names the vendor offers the model.
        mcp_servers: MCP server name -> status (``connected``, ``failed``, ``pending``...).
    """

    session_id: str | None
    model: str | None = None
    tools: tuple[str, ...] = ()
    mcp_servers: Mapping[str, str] = field(default_factory=dict)

    @property
    def kind(self) -> EventKind:
        return EventKind.SESSION


@dataclass(frozen=True)
class TextEvent(VendorEvent):
    """Assistant text (a whole block, not a delta)."""

    text: str
    message_id: str | None = None

    @property
    def kind(self) -> EventKind:
        return EventKind.TEXT


@dataclass(frozen=True)
class ThinkingEvent(VendorEvent):
    """Assistant reasoning text, where the vendor shows it."""

    text: str
    message_id: str | None = None

    @property
    def kind(self) -> EventKind:
        return EventKind.THINKING


@dataclass(frozen=True)
class ToolUseEvent(VendorEvent):
    """The model asked to use a tool (native or MCP)."""

    tool_use_id: str
    name: str
    input: JSON
    message_id: str | None = None

    @property
    def kind(self) -> EventKind:
        return EventKind.TOOL_USE


@dataclass(frozen=True)
class ToolResultEvent(VendorEvent):
    """A tool's result as the vendor fed it back to the model."""

    tool_use_id: str
    content: str
    is_error: bool = False

    @property
    def kind(self) -> EventKind:
        return EventKind.TOOL_RESULT


@dataclass(frozen=True)
class PermissionRequestEvent(VendorEvent):
    """The vendor asks whether a native tool may run (Claude ``control_request/can_use_tool``).

    Attributes:
        request_id: The vendor's correlation id, echoed in the answer.
        tool_name: Native tool name (``Bash``, ``Write``, ``mcp__x__y``...).
        input: The tool input; an allow must echo it as ``updatedInput`` (observed.md §1.6).
        tool_use_id: The tool-use id, where given.
    """

    request_id: str
    tool_name: str
    input: JSON
    tool_use_id: str | None = None

    @property
    def kind(self) -> EventKind:
        return EventKind.PERMISSION_REQUEST


@dataclass(frozen=True)
class ControlCancelEvent(VendorEvent):
    """The vendor abandoned an in-flight control request (``control_cancel_request``)."""

    request_id: str

    @property
    def kind(self) -> EventKind:
        return EventKind.CONTROL_CANCEL


@dataclass(frozen=True)
class Usage:
    """Token usage of a turn or run (tokens).

    ``estimated`` is True when the figures were derived from text length rather than
    reported by the vendor.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
            self.estimated or other.estimated,
        )

    def __sub__(self, other: Usage) -> Usage:
        """Field-wise ``self - other`` clamped at 0 (tokens); ``estimated`` is ``self``'s.

        The one subtraction of usages: a parser turns a vendor's running total into the part
        not yet counted (``total - counted``), or a thread total into one turn's figure
        (``thread_total - LaunchRequest.thread_usage``).
        """
        return Usage(
            max(self.input_tokens - other.input_tokens, 0),
            max(self.output_tokens - other.output_tokens, 0),
            max(self.cache_creation_input_tokens - other.cache_creation_input_tokens, 0),
            max(self.cache_read_input_tokens - other.cache_read_input_tokens, 0),
            self.estimated,
        )


@dataclass(frozen=True)
class UsageEvent(VendorEvent):
    """New usage observed (already de-duplicated by the parser): an increment, not a total."""

    usage: Usage

    @property
    def kind(self) -> EventKind:
        return EventKind.USAGE


@dataclass(frozen=True)
class ResultEvent(VendorEvent):
    """The turn ended (Claude ``result``).

    Attributes:
        is_error: Whether the vendor reports the turn as failed.
        subtype: Vendor subtype (``success``, ``error_during_execution``, ...).
        text: Final assistant text, if any.
        session_id: Vendor session id the turn ran in.
        usage: Usage of this turn as the vendor reports it (per turn for Claude).
        cost_usd: Vendor-computed cost of this turn, if reported (USD, an exact decimal read with
            :func:`~octipusd.adapterkit.as_cost`). A parser whose vendor reports a cumulative figure
            reports its increase (Claude's ``total_cost_usd`` is cumulative per process: 0.01, 0.03,
            0.06 over three turns are turns of 0.01, 0.02, 0.03).
        errors: Vendor error strings (e.g. ``No conversation found with session ID: ...``).
        turns: The turn's iterations, if reported (Claude ``num_turns``), for the turn budget.
    """

    is_error: bool
    subtype: str | None = None
    text: str | None = None
    session_id: str | None = None
    usage: Usage | None = None
    cost_usd: Decimal | None = None
    errors: tuple[str, ...] = ()
    turns: int | None = None

    @property
    def kind(self) -> EventKind:
        return EventKind.RESULT


@dataclass(frozen=True)
class ErrorEvent(VendorEvent):
    """The vendor reported an error that is not the turn's result (may be a warning)."""

    message: str
    fatal: bool = False

    @property
    def kind(self) -> EventKind:
        return EventKind.ERROR


@dataclass(frozen=True)
class StatusEvent(VendorEvent):
    """Progress information (retries, status changes, control acknowledgements)."""

    status: str

    @property
    def kind(self) -> EventKind:
        return EventKind.STATUS


@dataclass(frozen=True)
class SteeringAckEvent(VendorEvent):
    """The vendor's answer to guidance written to its stdin (:meth:`StreamParser.steer`): Claude's
    replay (``--replay-user-messages``), Codex's ``turn/steer`` response. Receipt, not proof that the
    change was applied (seed 003); a refusal (Codex: the turn ended) keeps it for a follow-up.

    Attributes:
        text: The guidance text.
        refused: The vendor's reason for refusing it, or None: delivered.
    """

    text: str
    refused: str | None = None

    @property
    def kind(self) -> EventKind:
        return EventKind.STEERING_DELIVERED if self.refused is None else EventKind.STEERING_REFUSED


@dataclass(frozen=True)
class UnknownEvent(VendorEvent):
    """A JSON line of a type the adapter does not know; kept whole in ``raw``."""

    type: str | None

    @property
    def kind(self) -> EventKind:
        return EventKind.UNKNOWN


@dataclass(frozen=True)
class StdinWriteEvent(VendorEvent):
    """The adapter asks the runtime to write these lines to the vendor's stdin.

    For request/response protocols over stdio (JSON-RPC: Codex ``app-server``, Vibe's ACP), the
    next request depends on an earlier response (a thread id, a session id). The adapter stays
    pure: its parser returns the lines to send, and the runtime writes them in order.

    Attributes:
        lines: Complete lines without trailing newline.
    """

    lines: tuple[str, ...]

    @property
    def kind(self) -> EventKind:
        return EventKind.STDIN_WRITE


@dataclass(frozen=True)
class RunFailureEvent(VendorEvent):
    """The adapter found that the run cannot do its work, though the vendor goes on.

    E.g. the vendor reports the Octipus MCP bridge as not ``connected`` (Claude lists it
    ``pending`` or ``failed`` in ``system/init`` and still exits 0, observed.md §1.5). The runtime
    fails the run with ``reason`` (the first such reason wins) and stops the vendor; it knows no
    vendor's statuses itself.

    A bridge the vendor still connects to (Claude's ``pending``) is not a failure yet: a loaded
    machine can make the handshake outlast the vendor's wait before it announces its session. With
    ``unless_bridge_answers`` the runtime fails the run only if the bridge has not served the
    vendor's tool list within its grace (``RunLimits.bridge_connect_grace_s``).

    Attributes:
        reason: One sentence for a person: what the vendor reported and what it means.
        unless_bridge_answers: The vendor may still complete its MCP handshake with the bridge.
    """

    reason: str
    unless_bridge_answers: bool = False

    @property
    def kind(self) -> EventKind:
        return EventKind.RUN_FAILURE


@dataclass(frozen=True)
class UnparsedLine(VendorEvent):
    """A line that is not a JSON object; ``text`` keeps it (decoded with replacement)."""

    text: str

    @property
    def kind(self) -> EventKind:
        return EventKind.UNPARSED
