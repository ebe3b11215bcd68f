"""Vibe's headless mode (``vibe -p``, seed 003's buffered mode): the wrapper and the output parser.

``vibe --output streaming`` prints one JSON entry per line as the session journal grows
(observed.md §3.3): ``message`` entries (``role`` user / assistant), ``effect`` entries (a tool
ran: ``detail.toolName``, ``detail.input``, ``state.status``, ``state.outputText``) and
``callback`` entries (an approval request, which headless mode answers ``deny`` itself). Every
entry carries the ``sessionId``. Nothing marks the end of the run and no usage is printed; a
turn, token or time limit stops Vibe with exit code 3 and ``Stopped: turn_limit`` on stderr, an
unknown ``--resume`` id exits 1 with ``Error: Session not found: <id>`` (both reproduced on 3.0.2).

``--output-dir DIR`` makes Vibe write ``DIR/export.json`` on every exit: ``outcome``
(``finished``, ``turn_limit``, ``usage_error``...), ``error.message``, ``session_id``,
``usage {input_tokens, output_tokens, cached_input_tokens, total_tokens}`` of this invocation,
``cost_usd``, ``steps``, ``exit_code`` and the effective ``config``. The adapter is pure and
reads no file, so the launch runs Vibe under a small ``/bin/sh`` wrapper (:data:`WRAPPER`) that

1. prints a header line (:data:`HEADER_TYPE`) holding what the parser must know of the launch
   (bridge name, permission mode, limits; no secret),
2. runs Vibe (stdin ``/dev/null``, stdout and stderr untouched),
3. prints ``export.json`` as one line (newlines dropped; JSON strings cannot hold raw newlines, so
   the text stays valid JSON), deletes the output folder and exits with Vibe's exit code.

The parser (:class:`HeadlessParser`) turns entries into events as they come and builds the
run's usage and :class:`~octipusd.adapter.ResultEvent` in :meth:`HeadlessParser.finish` (called
by the runtime after the process exits). Usage is the export's (reported); without an export
(Vibe crashed or was killed) it is estimated at about four characters per token from the text
the stream shows and flagged ``estimated`` (seed 003 "Permissions and limits").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from octipusd.adapter import (
    JSON,
    ResultEvent,
    SessionEvent,
    StatusEvent,
    TextEvent,
    ThinkingEvent,
    ToolResultEvent,
    ToolUseEvent,
    UnknownEvent,
    Usage,
    UsageEvent,
    VendorEvent,
)

from ._coerce import as_cost, as_dict, as_int, as_list, as_str, as_tokens, is_zero, to_text, usage_from_totals
from .signals import SESSION_MISSING_SUBTYPE, SESSION_MISSING_TEXT, estimated_usage, vendor_tool_name

#: ``type`` of the wrapper's header line.
HEADER_TYPE: Final = "octipus.vibe.headless"

#: The ``/bin/sh -c`` script around ``vibe`` (arguments: header line, output dir, vibe argv...).
#: It clears the output dir, prints the header, runs Vibe, prints ``export.json`` on one line,
#: removes the output dir again (the export repeats the user's effective config, and the journal
#: copy duplicates Vibe's own session store) and exits with Vibe's status. Every value arrives as a
#: positional parameter: nothing is interpolated into the script; only a directory named
#: ``vibe-output`` is ever removed.
WRAPPER: Final = (
    'header=$1; out=$2; shift 2; case "$out" in */vibe-output) rm -rf -- "$out";; esac; '
    'printf \'%s\\n\' "$header"; "$@"; rc=$?; '
    'if [ -s "$out/export.json" ]; then tr -d \'\\r\\n\' < "$out/export.json"; echo; fi; '
    'case "$out" in */vibe-output) rm -rf -- "$out";; esac; exit "$rc"'
)

#: ``$0`` of the wrapper (shows in ``ps``).
WRAPPER_NAME: Final = "octipus-vibe-headless"

#: Export keys never kept in events: the effective configuration can hold literal MCP headers.
_EXPORT_DROPPED: Final = ("config",)

_LIMIT_OUTCOMES: Final = {
    "turn_limit": "error_max_turns",
    "token_limit": "error_max_tokens",
    "price_limit": "error_max_budget",
    "time_limit": "error_time_limit",
}


@dataclass(frozen=True)
class HeadlessHeader:
    """What the wrapper's first line tells the parser about the launch.

    Attributes:
        bridge: MCP server name of the Octipus bridge, or None.
        agent: The ``--agent`` Vibe runs with.
        turn_limit: ``--max-turns``.
        token_limit: ``--max-tokens``.
        notice: A note for the run's events (e.g. bridge tools need ``full`` in headless mode), or None.
    """

    bridge: str | None
    agent: str
    turn_limit: int
    token_limit: int
    notice: str | None = None

    def to_line(self) -> str:
        """The header as one compact JSON line."""
        body = {
            "type": HEADER_TYPE,
            "bridge": self.bridge,
            "agent": self.agent,
            "turnLimit": self.turn_limit,
            "tokenLimit": self.token_limit,
            "notice": self.notice,
        }
        return json.dumps(body, separators=(",", ":"), ensure_ascii=True)

    @classmethod
    def from_object(cls, obj: JSON) -> HeadlessHeader:
        """Read a header back (missing fields become neutral values)."""
        return cls(
            bridge=as_str(obj.get("bridge")),
            agent=as_str(obj.get("agent")) or "",
            turn_limit=as_int(obj.get("turnLimit")) or 0,
            token_limit=as_int(obj.get("tokenLimit")) or 0,
            notice=as_str(obj.get("notice")),
        )


def is_headless_object(obj: JSON) -> bool:
    """Whether a decoded line belongs to the headless transport.

    Args:
        obj: A decoded stdout line.

    Returns:
        True for the wrapper's header, a journal entry (``sessionId`` + ``type``, no ``jsonrpc``)
        or the printed export.
    """
    if obj.get("type") == HEADER_TYPE:
        return True
    if "sessionId" in obj and "type" in obj and "jsonrpc" not in obj:
        return True
    return is_export(obj)


def is_export(obj: JSON) -> bool:
    """Whether a decoded line is the printed ``export.json``.

    Args:
        obj: A decoded stdout line.

    Returns:
        True when it has ``schema_version``, ``outcome`` and ``exit_code`` (export schema 1).
    """
    return "schema_version" in obj and "outcome" in obj and "exit_code" in obj


def _text_blocks(content: object) -> tuple[str, str]:
    """(text, reasoning) joined from a message's content blocks."""
    text: list[str] = []
    reasoning: list[str] = []
    for item in as_list(content):
        block = as_dict(item)
        value = as_str(block.get("text"))
        if value is None:
            continue
        if block.get("type") in ("reasoning", "thinking"):
            reasoning.append(value)
        else:
            text.append(value)
    return "".join(text), "".join(reasoning)


class HeadlessParser:
    """Stateful parser of one headless run's stdout (wrapper header, entries, export).

    ====================================  ==================================================
    line                                  events
    ====================================  ==================================================
    header                                :class:`StatusEvent` ``launch`` (``notice`` in
                                          ``raw`` when the header has one)
    first entry with a ``sessionId``      :class:`SessionEvent` (bridge ``unknown``: headless
                                          Vibe prints nothing about MCP, not even a failure)
    ``message`` user                      :class:`StatusEvent` ``user_message``
    ``message`` assistant                 :class:`TextEvent` (and :class:`ThinkingEvent` for
                                          reasoning blocks)
    ``effect``                            :class:`ToolUseEvent` once per id, then
                                          :class:`ToolResultEvent` when completed or failed;
                                          a completed bridge tool call reports the bridge
                                          ``connected`` (:class:`SessionEvent`)
    ``callback`` and other entries        :class:`StatusEvent` named after the entry type
    export line                           :class:`StatusEvent` ``export`` (``config`` removed
                                          from ``raw``)
    other JSON                            :class:`UnknownEvent`
    ``finish(exit_code)``                 :class:`UsageEvent` + :class:`ResultEvent`
    ====================================  ==================================================
    """

    def __init__(self) -> None:
        self.header: HeadlessHeader | None = None
        self.session_id: str | None = None
        self.export: JSON | None = None
        self._statuses: dict[str, str] = {}
        self._tools: dict[str, bool] = {}  # tool id -> result emitted
        self._last_text: str | None = None
        self._input_chars = 0
        self._output_chars = 0
        self._finished = False

    def feed_object(self, obj: JSON) -> list[VendorEvent]:
        """Parse one decoded line.

        Args:
            obj: A decoded stdout line (header, journal entry or export).

        Returns:
            The events it gives, in order (see the class docstring).
        """
        if obj.get("type") == HEADER_TYPE:
            self.header = HeadlessHeader.from_object(obj)
            if self.header.bridge:
                self._statuses[self.header.bridge] = "unknown"
            return [StatusEvent(raw=obj, status="launch")]
        if is_export(obj):
            self.export = {k: v for k, v in obj.items() if k not in _EXPORT_DROPPED}
            session_id = as_str(self.export.get("session_id"))
            self.session_id = self.session_id or session_id
            return [StatusEvent(raw=self.export, status="export")]
        events: list[VendorEvent] = []
        session_id = as_str(obj.get("sessionId"))
        if session_id and self.session_id is None:
            self.session_id = session_id
            events.append(SessionEvent(raw=obj, session_id=session_id, mcp_servers=dict(self._statuses)))
        kind = as_str(obj.get("type"))
        if kind == "message":
            events.extend(self._message(obj))
        elif kind == "effect":
            events.extend(self._effect(obj))
        elif kind is not None and session_id:
            events.append(StatusEvent(raw=obj, status=kind))
        else:
            events.append(UnknownEvent(raw=obj, type=kind))
        return events

    def _message(self, obj: JSON) -> list[VendorEvent]:
        text, reasoning = _text_blocks(obj.get("content"))
        message_id = as_str(obj.get("id"))
        if obj.get("role") != "assistant":
            self._input_chars += len(text)
            return [StatusEvent(raw=obj, status=f"{as_str(obj.get('role')) or 'unknown'}_message")]
        self._output_chars += len(text) + len(reasoning)
        events: list[VendorEvent] = []
        if reasoning:
            events.append(ThinkingEvent(raw=obj, text=reasoning, message_id=message_id))
        if text or not reasoning:
            events.append(TextEvent(raw=obj, text=text, message_id=message_id))
            if text:
                self._last_text = text
        return events

    def _effect(self, obj: JSON) -> list[VendorEvent]:
        detail = as_dict(obj.get("detail"))
        state = as_dict(obj.get("state"))
        tool_id = as_str(obj.get("id")) or ""
        name = vendor_tool_name(as_str(detail.get("toolName")) or as_str(obj.get("title")) or "unknown")
        tool_input = as_dict(detail.get("input"))
        events: list[VendorEvent] = []
        if tool_id not in self._tools:
            self._tools[tool_id] = False
            self._output_chars += len(to_text(tool_input))
            events.append(ToolUseEvent(raw=obj, tool_use_id=tool_id, name=name, input=tool_input))
        status = as_str(state.get("status"))
        if status in ("completed", "failed") and not self._tools[tool_id]:
            self._tools[tool_id] = True
            error = as_dict(state.get("error"))
            content = as_str(state.get("outputText")) or ""
            if not content and error:
                content = as_str(error.get("message")) or to_text(error)
            self._input_chars += len(content)
            bridge = self.header.bridge if self.header else None
            bridge_call = bridge is not None and name.startswith(f"mcp__{bridge}__")
            if bridge and bridge_call and status == "completed" and self._statuses.get(bridge) != "connected":
                self._statuses[bridge] = "connected"
                events.append(
                    SessionEvent(raw=obj, session_id=self.session_id, mcp_servers=dict(self._statuses))
                )
            events.append(
                ToolResultEvent(raw=obj, tool_use_id=tool_id, content=content, is_error=status == "failed")
            )
        return events

    def total_usage(self) -> Usage:
        """The export's usage (reported) or, without an export, the text-length estimate (tokens).

        An export whose ``usage`` is null (Vibe stopped before any model call, e.g. an unknown
        ``--resume`` id) counts as zero, not as an estimate.
        """
        if self.export is not None:
            export_usage = as_dict(self.export.get("usage"))
            return usage_from_totals(
                as_tokens(export_usage.get("input_tokens")),
                as_tokens(export_usage.get("output_tokens")),
                as_tokens(export_usage.get("cached_input_tokens")),
            )
        return estimated_usage(self._input_chars, self._output_chars)

    def finish(self, exit_code: int | None) -> list[VendorEvent]:
        """Emit the run's usage and result once the process has exited.

        The run fails when the exit code is not 0 or the export's ``outcome`` is not ``finished``.
        ``errors`` name the cause: the export's ``error.message`` (``Session not found: <id>`` for an
        unknown resume id, subtype ``session_not_found``), the limit Vibe stopped at (outcome
        ``turn_limit`` -> subtype ``error_max_turns`` and so on), or the exit code.

        Args:
            exit_code: Vibe's exit status as the wrapper returned it, or None.

        Returns:
            ``[UsageEvent, ResultEvent]`` (no usage event when the usage is zero); ``[]`` on a
            second call.
        """
        if self._finished:
            return []
        self._finished = True
        export = self.export or {}
        raw: JSON = {"type": "octipus.vibe.exit", "exitCode": exit_code, "export": export or None}
        usage = self.total_usage()
        events: list[VendorEvent] = []
        if not is_zero(usage):
            events.append(UsageEvent(raw=raw, usage=usage))
        outcome = as_str(export.get("outcome"))
        error_message = as_str(as_dict(export.get("error")).get("message"))
        errors: list[str] = []
        subtype = outcome or ("success" if exit_code == 0 else "error")
        if error_message:
            errors.append(error_message)
            if SESSION_MISSING_TEXT in error_message:
                subtype = SESSION_MISSING_SUBTYPE
        if outcome in _LIMIT_OUTCOMES:
            subtype = _LIMIT_OUTCOMES[outcome]
            limits = as_dict(export.get("limits"))
            errors.append(f"Vibe stopped at its {outcome.replace('_', ' ')} ({to_text(limits)})")
        failed = exit_code != 0 or (outcome is not None and outcome != "finished")
        if failed and not errors:
            if exit_code is None:
                errors.append("vibe ended without an exit status")
            elif exit_code < 0:
                errors.append(f"vibe was killed by signal {-exit_code}")
            else:
                errors.append(
                    f"vibe exited with code {exit_code}" + (f" (outcome {outcome})" if outcome else "")
                )
        events.append(
            ResultEvent(
                raw=raw,
                is_error=failed,
                subtype=subtype,
                text=self._last_text,
                session_id=as_str(export.get("session_id")) or self.session_id,
                usage=usage,
                cost_usd=as_cost(export.get("cost_usd")),
                errors=tuple(errors) if failed else (),
            )
        )
        return events
