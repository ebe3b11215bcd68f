"""Parsing Claude Code's stream-json stdout into typed Octipus events.

One :class:`ClaudeStreamParser` reads one process's stdout, one complete line per
:meth:`~ClaudeStreamParser.feed` call. Line -> events (shapes from observed.md §1.3-§1.7 and
sources.md §1.6-§1.7; every event keeps the line's decoded object as ``raw``):

====================================  =====================================================
stdout line                           events
====================================  =====================================================
``system`` / ``init``                 :class:`SessionEvent` (session id, model, tools,
                                      MCP server name -> status), then
                                      :class:`RunFailureEvent` when the launch has a bridge
                                      and init does not list it ``connected``
                                      (:func:`~octipus_claude_code.mcp_failure`)
``system`` / any other subtype        :class:`StatusEvent` whose ``status`` is the subtype
                                      (``api_retry``, ``status``, ``thinking_tokens``,
                                      ``compact_boundary``...); ``system`` without a subtype
                                      gives ``status="system"``
``assistant``                         per content block, in order: :class:`TextEvent`
                                      (``text``), :class:`ThinkingEvent` (``thinking``),
                                      :class:`ToolUseEvent` (``tool_use``); other block types
                                      give one :class:`UnknownEvent` (type ``assistant``) for
                                      the line; then :class:`ErrorEvent` (non-fatal) when the
                                      line carries a top-level ``error`` code; then a
                                      :class:`UsageEvent` when ``message.id`` is new
``user`` with ``tool_result`` blocks  one :class:`ToolResultEvent` per block (content
                                      flattened to text)
``user`` without tool results         :class:`SteeringAckEvent` for the ``isReplay``
                                      echo (``--replay-user-messages``) of guidance sent
                                      with :meth:`~ClaudeStreamParser.steer`;
                                      :class:`StatusEvent` ``user_replay`` for the echo of
                                      the launch prompt, or ``user_message`` (e.g.
                                      "[Request interrupted by user]")
``control_request`` / ``can_use_tool`` :class:`PermissionRequestEvent`
``control_request`` / other subtypes  :class:`UnknownEvent` (type ``control_request``) +
(or without ``tool_name``)            :class:`StdinWriteEvent` answering it with
                                      :func:`~octipus_claude_code.encode_control_error`, so
                                      Claude never waits on it (none without ``request_id``)
``control_cancel_request``            :class:`ControlCancelEvent`
``control_response``                  :class:`StatusEvent` ``control_response``
``result``                            (:class:`UsageEvent` reconciliation, see below) +
                                      :class:`ResultEvent`
``stream_event``                      :class:`StatusEvent` ``stream_event``
any other JSON object                 :class:`UnknownEvent` with the vendor's ``type``
not JSON / not an object              :class:`UnparsedLine` keeping the text (UTF-8 decoded
                                      with replacement characters)
====================================  =====================================================

Usage accounting (sources.md §1.8, observed.md §1.3). Several ``assistant`` lines of one API
response share ``message.id`` and carry identical usage, so each message id is counted once.
Their ``output_tokens`` is only the placeholder from ``message_start``; the ``result`` line's
``usage`` is authoritative for its turn (it covers every API call of the turn, with real output
counts) but it excludes subagents and may be zeroed after a crash. So a completed turn counts the
field-wise maximum of ``result.usage`` and the turn's de-duplicated assistant usage (in practice
exactly ``result.usage``), and a turn still running counts its de-duplicated assistant usage.
When the result raises a figure, the parser emits the difference as a :class:`UsageEvent` just
before the :class:`ResultEvent`; hence the sum of all ``UsageEvent.usage`` always equals
:meth:`ClaudeStreamParser.total_usage` and never decreases. Cost: ``total_cost_usd`` is cumulative
per process (observed.md §1.3); each :class:`ResultEvent` carries its increase, the turn's cost.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from decimal import Decimal

from octipusd.adapter import (
    JSON,
    ControlCancelEvent,
    ErrorEvent,
    LaunchRequest,
    PermissionRequestEvent,
    ResultEvent,
    SessionEvent,
    StatusEvent,
    StdinWriteEvent,
    Steering,
    SteeringAckEvent,
    StreamParserDefaults,
    TextEvent,
    ThinkingEvent,
    ToolResultEvent,
    ToolUseEvent,
    UnknownEvent,
    UnparsedLine,
    Usage,
    UsageEvent,
    VendorEvent,
)
from octipusd.adapterkit import bridge_not_connected

from ._coerce import (
    as_cost,
    as_dict,
    as_list,
    as_str,
    decode_line,
    field_max,
    is_zero,
    load_object,
    parse_usage,
    to_text,
)
from .control import encode_control_error
from .launch import encode_user_message

log = logging.getLogger("octipus_claude_code")


def flatten_tool_result(content: object) -> str:
    """Flatten a ``tool_result`` block's ``content`` to text.

    A string stays as is; a list of blocks joins the ``text`` of text blocks, ``[image]`` for
    image blocks and compact JSON for anything else, one per line; None gives ``""``; any other
    value gives compact JSON. (observed.md §1.3/§1.5: content is a string for built-in tools and
    a list of ``{"type":"text"}`` blocks for MCP tools.)

    Args:
        content: The block's ``content`` value.

    Returns:
        The text.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for item in content:
            if isinstance(item, str):
                parts.append(item)
                continue
            block = as_dict(item)
            kind = block.get("type")
            text = as_str(block.get("text"))
            if kind == "text" and text is not None:
                parts.append(text)
            elif kind == "image":
                parts.append("[image]")
            else:
                parts.append(to_text(item))
        return "\n".join(parts)
    return to_text(content)


class ClaudeStreamParser(StreamParserDefaults):
    """Stateful parser of one Claude Code process's stream-json stdout.

    Implements :class:`octipusd.adapter.StreamParser`. Not thread-safe; one per run.
    See the module docstring for the line -> event table and the usage rules.

    Args:
        request: The launch the output belongs to; its bridge is the MCP server ``system/init`` must
            list ``connected``. None (tests of recorded streams): no bridge is checked.
    """

    def __init__(self, request: LaunchRequest | None = None) -> None:
        self._bridge = request.bridge.server_name if request is not None and request.bridge else None
        # the launch prompt is replayed once, maybe after guidance was already written (a stalled
        # first model call): until then a replay of the same text is the prompt's
        self._prompt: str | None = request.prompt if request is not None else None
        self._steered: list[str] = []  # guidance written, not yet replayed, in order
        self._seen_message_ids: set[str] = set()
        self._completed = Usage()  # reconciled usage of turns that ended with a result
        self._turn = Usage()  # de-duplicated assistant usage since the last result
        self._cost_reported = Decimal(0)  # total_cost_usd of the last result: cumulative per process
        self._handlers: dict[str, Callable[[JSON], list[VendorEvent]]] = {
            "system": self._system,
            "assistant": self._assistant,
            "user": self._user,
            "control_request": self._control_request,
            "control_cancel_request": self._control_cancel,
            "control_response": self._control_response,
            "result": self._result,
            "stream_event": self._stream_event,
        }

    # ------------------------------------------------------------------ public

    def feed(self, line: bytes) -> list[VendorEvent]:
        """Parse one complete stdout line (without its newline) into events.

        Args:
            line: The raw line, any length, any bytes.

        Returns:
            Zero or more events, in stream order (see the module docstring).

        Never raises on vendor input: bytes that are not UTF-8 are decoded with replacement
        characters, text that is not a JSON object becomes :class:`UnparsedLine`, and an object
        of an unexpected shape becomes :class:`UnknownEvent`.
        """
        text = decode_line(line)
        obj = load_object(text)
        if obj is None:
            return [UnparsedLine(raw=None, text=text)]
        vendor_type = as_str(obj.get("type"))
        handler = self._handlers.get(vendor_type) if vendor_type is not None else None
        if handler is None:
            return [UnknownEvent(raw=obj, type=vendor_type)]
        try:
            return handler(obj)
        except Exception:  # last resort, logged: an unforeseen shape must not kill the run
            log.exception("Claude %s line of an unforeseen shape, kept as an unknown event", vendor_type)
            return [UnknownEvent(raw=obj, type=vendor_type)]

    def total_usage(self) -> Usage:
        """Usage of the run so far (tokens), each API message counted once.

        Completed turns count ``max(result.usage, de-duplicated assistant usage)`` field by field;
        the turn in progress counts its de-duplicated assistant usage (module docstring).

        Returns:
            The total; equal to the sum of every :class:`UsageEvent` emitted so far.
        """
        return self._completed + self._turn

    def finish(self, exit_code: int | None) -> list[VendorEvent]:
        """Nothing is buffered: every event was emitted as its line arrived."""
        return []

    def prompt_pending(self) -> bool:
        """Whether Claude has not replayed the launch prompt yet (``--replay-user-messages``): a
        resumed Claude first answers the notifications of the background tasks its earlier process
        left (``system/task_notification``, then a ``result`` of no turn), then replays the prompt."""
        return self._prompt is not None

    def steer(self, text: str) -> Steering:
        """Guidance while the CLI works: one more stream-json user message on stdin. Claude replays it
        (:class:`SteeringAckEvent`) when it takes it: merged into the running request after a
        tool result, or as one more turn after its result; a ``result`` follows either way (seed 003)."""
        self._steered.append(text)
        return Steering(lines=(encode_user_message(text),))

    # ---------------------------------------------------------------- handlers

    def _system(self, obj: JSON) -> list[VendorEvent]:
        subtype = as_str(obj.get("subtype"))
        if subtype != "init":
            return [StatusEvent(raw=obj, status=subtype or "system")]
        servers: dict[str, str] = {}
        for item in as_list(obj.get("mcp_servers")):
            entry = as_dict(item)
            name = as_str(entry.get("name"))
            if name is not None:
                servers[name] = as_str(entry.get("status")) or "unknown"
        tools = tuple(t for t in as_list(obj.get("tools")) if isinstance(t, str))
        session = SessionEvent(
            raw=obj,
            session_id=as_str(obj.get("session_id")),
            model=as_str(obj.get("model")),
            tools=tools,
            mcp_servers=servers,
        )
        failure = (
            bridge_not_connected(session, self._bridge, "Claude Code", "system/init")
            if self._bridge
            else None
        )
        return [session] if failure is None else [session, dataclasses.replace(failure, raw=obj)]

    def _assistant(self, obj: JSON) -> list[VendorEvent]:
        message = as_dict(obj.get("message"))
        message_id = as_str(message.get("id"))
        events: list[VendorEvent] = []
        unknown_block = False
        for item in as_list(message.get("content")):
            block = as_dict(item)
            kind = block.get("type")
            if kind == "text":
                events.append(TextEvent(raw=obj, text=as_str(block.get("text")) or "", message_id=message_id))
            elif kind == "thinking":
                events.append(
                    ThinkingEvent(raw=obj, text=as_str(block.get("thinking")) or "", message_id=message_id)
                )
            elif kind == "tool_use":
                events.append(
                    ToolUseEvent(
                        raw=obj,
                        tool_use_id=as_str(block.get("id")) or "",
                        name=as_str(block.get("name")) or "",
                        input=as_dict(block.get("input")),
                        message_id=message_id,
                    )
                )
            else:
                unknown_block = True
        if unknown_block or not events:
            events.append(UnknownEvent(raw=obj, type="assistant"))
        error = obj.get("error")
        if error is not None and error is not False:
            events.append(ErrorEvent(raw=obj, message=to_text(error), fatal=False))
        usage = parse_usage(message.get("usage"))
        new_message = message_id is None or message_id not in self._seen_message_ids
        if usage is not None and not is_zero(usage) and new_message:
            if message_id is not None:
                self._seen_message_ids.add(message_id)
            self._turn = self._turn + usage
            events.append(UsageEvent(raw=obj, usage=usage))
        return events

    def _user(self, obj: JSON) -> list[VendorEvent]:
        message = as_dict(obj.get("message"))
        events: list[VendorEvent] = []
        for item in as_list(message.get("content")):
            block = as_dict(item)
            if block.get("type") != "tool_result":
                continue
            events.append(
                ToolResultEvent(
                    raw=obj,
                    tool_use_id=as_str(block.get("tool_use_id")) or "",
                    content=flatten_tool_result(block.get("content")),
                    is_error=block.get("is_error") is True,
                )
            )
        if not events:
            if obj.get("isReplay") is True:
                return self._replay(obj, message.get("content"))
            events.append(StatusEvent(raw=obj, status="user_message"))
        return events

    def _replay(self, obj: JSON, content: object) -> list[VendorEvent]:
        """A replayed stdin user message: the prompt's echo, or the acknowledgement of guidance.

        Claude takes the messages queued on its stdin together when it next reads it and replays
        them as one, their texts joined by a newline (observed with two guidances sent while a model
        call was stalled): a replay that is the prompt and/or guidance written, in order, joined so,
        acknowledges every guidance it holds (one :class:`SteeringAckEvent` each).
        """
        text = content if isinstance(content, str) else flatten_tool_result(content)
        rest, prompt, acknowledged = text, False, []
        if self._prompt is not None and _takes(rest, self._prompt):
            rest, prompt = rest[len(self._prompt) + 1 :], True
        for written in list(self._steered):
            if not rest or not _takes(rest, written):
                break
            acknowledged.append(written)
            rest = rest[len(written) + 1 :]
        if rest or not (prompt or acknowledged):
            if text in self._steered:  # one guidance, replayed out of the order it was written in
                self._steered.remove(text)
                return [SteeringAckEvent(raw=obj, text=text)]
            return [StatusEvent(raw=obj, status="user_replay")]  # not (only) what Octipus wrote
        if prompt:
            self._prompt = None
        for written in acknowledged:
            self._steered.remove(written)
        events: list[VendorEvent] = [StatusEvent(raw=obj, status="user_replay")] if prompt else []
        return events + [SteeringAckEvent(raw=obj, text=written) for written in acknowledged]

    def _control_request(self, obj: JSON) -> list[VendorEvent]:
        request = as_dict(obj.get("request"))
        request_id = as_str(obj.get("request_id"))
        tool_name = as_str(request.get("tool_name"))
        if request.get("subtype") == "can_use_tool" and request_id and tool_name:
            return [
                PermissionRequestEvent(
                    raw=obj,
                    request_id=request_id,
                    tool_name=tool_name,
                    input=as_dict(request.get("input")),
                    tool_use_id=as_str(request.get("tool_use_id")),
                )
            ]
        unknown = UnknownEvent(raw=obj, type="control_request")
        if request_id is None:  # nothing to correlate an answer with
            return [unknown]
        answer = encode_control_error(request_id, f"unsupported control request {request.get('subtype')}")
        return [unknown, StdinWriteEvent(raw=obj, lines=(answer,))]

    def _control_cancel(self, obj: JSON) -> list[VendorEvent]:
        request_id = as_str(obj.get("request_id"))
        if request_id is None:
            return [UnknownEvent(raw=obj, type="control_cancel_request")]
        return [ControlCancelEvent(raw=obj, request_id=request_id)]

    def _control_response(self, obj: JSON) -> list[VendorEvent]:
        return [StatusEvent(raw=obj, status="control_response")]

    def _stream_event(self, obj: JSON) -> list[VendorEvent]:
        return [StatusEvent(raw=obj, status="stream_event")]

    def _result(self, obj: JSON) -> list[VendorEvent]:
        subtype = as_str(obj.get("subtype"))
        # Do not trust is_error alone: error_max_turns was recorded with is_error false (sources.md §1.7).
        is_error = obj.get("is_error") is True or (subtype is not None and subtype.startswith("error"))
        usage = parse_usage(obj.get("usage"))
        errors = tuple(to_text(e) for e in as_list(obj.get("errors")))
        num_turns = obj.get("num_turns")
        turns = num_turns if isinstance(num_turns, int) and not isinstance(num_turns, bool) else None
        events: list[VendorEvent] = []
        turn_total = self._turn if usage is None else field_max(usage, self._turn)
        increment = turn_total - self._turn
        if not is_zero(increment):
            events.append(UsageEvent(raw=obj, usage=increment))
        self._completed = self._completed + turn_total
        self._turn = Usage()
        total_cost = as_cost(obj.get("total_cost_usd"))
        turn_cost = None if total_cost is None else max(total_cost - self._cost_reported, Decimal(0))
        self._cost_reported = max(self._cost_reported, total_cost or Decimal(0))
        events.append(
            ResultEvent(
                raw=obj,
                is_error=is_error,
                subtype=subtype,
                text=as_str(obj.get("result")),
                session_id=as_str(obj.get("session_id")),
                usage=usage,
                cost_usd=turn_cost,
                errors=errors,
                turns=turns,
            )
        )
        return events


def _takes(text: str, part: str) -> bool:
    """Whether ``text`` starts with the message ``part``: all of it, or ``part`` and a newline."""
    return text == part or text.startswith(part + "\n")
