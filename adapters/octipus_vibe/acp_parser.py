"""The parser of ``vibe-acp``'s output (the agent's side of the ACP conversation of
:mod:`octipus_vibe.acp`): responses, ``session/update`` notifications and agent requests -> events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from octipusd.adapter import (
    JSON,
    ErrorEvent,
    PermissionRequestEvent,
    ResultEvent,
    SessionEvent,
    StatusEvent,
    StdinWriteEvent,
    TextEvent,
    ThinkingEvent,
    ToolResultEvent,
    ToolUseEvent,
    UnknownEvent,
    Usage,
    VendorEvent,
)
from octipusd.adapterkit import bridge_not_connected

from ._coerce import (
    as_dict,
    as_list,
    as_str,
    to_text,
)
from .acp import (
    INITIALIZE_ID,
    PROMPT_ID,
    SESSION_ID_SHOWN,
    SET_MODE_ID,
    SessionPlan,
    encode_cancel,
    encode_control_error,
    encode_request,
    request_id_text,
)
from .acp_usage import SessionUsage
from .signals import (
    SESSION_MISSING_SUBTYPE,
    SESSION_MISSING_TEXT,
    is_mcp_notice,
    mcp_statuses,
    merge_statuses,
    vendor_tool_name,
)

#: ``session/update`` kinds that carry no content of their own: they neither end a streamed
#: message nor produce events beyond a status (``usage_update`` produces usage increments).
PASSIVE_UPDATES: Final = frozenset(
    {
        "usage_update",
        "session_info_update",
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
    }
)

#: Stop reasons of a successful prompt (ACP ``StopReason``; Vibe answers ``end_turn`` for a turn
#: that completed). ``cancelled``, ``max_tokens``, ``max_turn_requests`` and ``refusal`` fail the run.
SUCCESS_STOP_REASONS: Final = frozenset({"end_turn"})


def _error_text(error: JSON) -> str:
    """``message`` of a JSON-RPC error, with ``data.details`` appended when present."""
    message = as_str(error.get("message")) or "error"
    details = as_str(as_dict(error.get("data")).get("details"))
    if details and details not in message:
        message = f"{message}: {details}"
    return message


def _content_text(blocks: object) -> str:
    """Join the text of ACP tool-call content (``[{"type":"content","content":{"type":"text"}}]``)."""
    parts: list[str] = []
    for item in as_list(blocks):
        entry = as_dict(item)
        inner = as_dict(entry.get("content"))
        text = as_str(inner.get("text"))
        if entry.get("type") == "content" and text is not None:
            parts.append(text)
        elif entry.get("type") == "diff":
            parts.append(f"[diff {as_str(entry.get('path')) or ''}]".strip())
        elif entry:
            parts.append(to_text(entry))
    return "\n".join(parts)


@dataclass
class _ToolCall:
    name: str
    input: JSON
    announced: bool = False
    finished: bool = False


class AcpParser:
    """Stateful parser of one ``vibe-acp`` process's stdout (one JSON-RPC object per call).

    Events per message (every event keeps the message as ``raw`` unless noted):

    ======================================  ==================================================
    message                                 events
    ======================================  ==================================================
    ``initialize`` result                   :class:`StatusEvent` ``initialized``
    session result                          :class:`SessionEvent` (session id; bridge
                                            ``pending``; ``raw`` with the id shortened to
                                            ``octipus/session``), then :class:`StdinWriteEvent` with
                                            ``session/set_mode`` (mode differs) or
                                            ``session/prompt``
    ``session/set_mode`` result             :class:`StdinWriteEvent` with ``session/prompt``
    ``agent_message_chunk``                 collected per ``messageId``; a whole
                                            :class:`TextEvent` when the message ends (``raw``
                                            is a merged ``agent_message_chunk`` update); an MCP
                                            notice instead gives :class:`ErrorEvent` +
                                            :class:`SessionEvent` (bridge ``failed`` /
                                            ``needs-auth``) + :class:`RunFailureEvent`
                                            when it names the bridge
    ``agent_thought_chunk``                 the same, as :class:`ThinkingEvent`
    ``tool_call``                           :class:`ToolUseEvent` (name mapped by
                                            :func:`~octipus_vibe.signals.vendor_tool_name`,
                                            input = ``rawInput``)
    ``tool_call_update`` completed/failed   :class:`ToolResultEvent`
    ``usage_update``                        :class:`UsageEvent` with the increment, if any;
                                            a :class:`StdinWriteEvent` with ``session/cancel``
                                            when the run passes its turn or token cap
    other ``session/update``                :class:`StatusEvent` named after the update kind
    updates before the session result       none; one :class:`StatusEvent` ``history``
                                            (``raw``: ``{"replayedUpdates": n}``) after the
                                            session result (a ``session/load`` replays the old
                                            conversation, which is not stored again)
    ``session/request_permission``          :class:`PermissionRequestEvent`
    any other agent request                 :class:`StdinWriteEvent` with a JSON-RPC error
                                            (:func:`encode_control_error`) + :class:`UnknownEvent`
    prompt result                           (usage reconciliation) + :class:`ResultEvent`
    error of any Octipus request            :class:`ResultEvent` ``is_error`` (subtype
                                            ``session_not_found`` for ``Session not found``)
    ======================================  ==================================================

    Bridge status (``SessionEvent.mcp_servers``): ``pending`` when the session exists;
    ``failed`` / ``needs-auth`` when Vibe posts its MCP notice; ``connected`` at the first sign
    that the model turn runs (an assistant message or thought, a tool call, a permission
    request, or the prompt result) without such a notice. Evidence: Vibe posts the notice from
    a task that waits for the session's MCP discovery to settle (``runtime.wait_until_ready``)
    and the model is only called once the session is ready, so on 3.0.2 the notice always came
    before the user message echo and the first model output (refused token and unreachable
    server both checked). A notice arriving later still turns the status to ``failed``.

    Usage: Vibe's figures are cumulative per session, also across ``session/load`` (observed:
    300/60 after a load of a 200/40 session). The parser takes the totals announced before the
    first model step (``usage_update`` with ``_meta.steps == 0``) as the baseline and reports the
    run's usage as the difference; ``input_tokens`` excludes cached prompt tokens
    (``cache_read_input_tokens``). The sum of the :class:`UsageEvent` increments always equals
    :meth:`total_usage`.

    Limits: ACP has no turn or token cap, so the parser enforces the plan's. Model calls are
    counted as rises of the session's prompt-token total (Vibe's ``_meta.steps`` lags: it still
    read 1 after the second call on 3.0.2); past ``turn_limit`` calls, or past ``token_limit``
    run tokens (input + output + cache reads), it sends ``session/cancel`` once. The run then
    fails with subtype ``error_max_turns`` / ``error_max_tokens``, even when the turn ended
    before the cancel took effect (a cap reached is a failed run, as in headless mode where
    Vibe exits 3). A cap can be passed by the call in flight: the parser only sees a call once
    its usage is reported.
    """

    def __init__(self) -> None:
        self.plan: SessionPlan | None = None
        self.session_id: str | None = None
        self._ready = False  # the session result arrived
        self._replayed = 0  # session/update notifications before it (a load's history replay)
        self._prompt_sent = False
        self._finished = False  # a ResultEvent was emitted
        self._statuses: dict[str, str] = {}
        self._connected_reported = False
        self._tools: dict[str, _ToolCall] = {}
        self._text_id: str | None = None
        self._text: list[str] = []
        self._thought_id: str | None = None
        self._thought: list[str] = []
        self._last_text: str | None = None
        self._usage = SessionUsage()

    # ------------------------------------------------------------------ public

    def feed_object(self, obj: JSON) -> list[VendorEvent]:
        """Parse one decoded JSON-RPC message.

        Args:
            obj: One line of ``vibe-acp`` stdout, decoded.

        Returns:
            The events it gives, in order (see the class docstring).
        """
        method = as_str(obj.get("method"))
        has_id = "id" in obj
        if method is not None and has_id:
            return self._agent_request(obj, method)
        if method is not None:
            return self._notification(obj, method)
        if has_id and ("result" in obj or "error" in obj):
            return self._response(obj)
        return [UnknownEvent(raw=obj, type="jsonrpc")]

    def finish(self) -> list[VendorEvent]:
        """Flush a message still being collected when the output ends (no result is invented:
        the runtime reports a run without result with the process's exit code and stderr)."""
        return self._flush()

    def total_usage(self) -> Usage:
        """Usage of this run so far (tokens; session totals minus the baseline)."""
        return self._usage.emitted

    @property
    def mcp_servers(self) -> Mapping[str, str]:
        """MCP server name -> status as last reported."""
        return dict(self._statuses)

    # ------------------------------------------------------------------ responses

    def _response(self, obj: JSON) -> list[VendorEvent]:
        request_id = obj.get("id")
        error = as_dict(obj.get("error")) if "error" in obj else None
        result = as_dict(obj.get("result"))
        plan = SessionPlan.from_id(request_id)
        if plan is not None:
            return self._session_response(obj, plan, error, result)
        if request_id == INITIALIZE_ID:
            if error is not None:
                return [
                    self._fail(obj, "initialize_error", f"vibe-acp refused initialize: {_error_text(error)}")
                ]
            return [StatusEvent(raw=obj, status="initialized")]
        if request_id == SET_MODE_ID:
            if error is not None:
                mode = self.plan.mode if self.plan else None
                return [
                    self._fail(
                        obj, "set_mode_error", f"Vibe refused session mode {mode!r}: {_error_text(error)}"
                    )
                ]
            return self._send_prompt(obj)
        if request_id == PROMPT_ID:
            return self._prompt_response(obj, error, result)
        return [UnknownEvent(raw=obj, type="response")]

    def _session_response(
        self, obj: JSON, plan: SessionPlan, error: JSON | None, result: JSON
    ) -> list[VendorEvent]:
        self.plan = plan
        # the id repeats the whole prompt: events keep the response without it
        obj = {**obj, "id": SESSION_ID_SHOWN}
        if error is not None:
            message = _error_text(error)
            missing = SESSION_MISSING_TEXT in message
            subtype = SESSION_MISSING_SUBTYPE if missing else "session_error"
            if not missing:
                verb = "load" if plan.resume else "start"
                message = f"Vibe could not {verb} the session: {message}"
            return [self._fail(obj, subtype, message, session_id=plan.resume)]
        session_id = as_str(result.get("sessionId")) or plan.resume
        if not session_id:
            return [
                self._fail(obj, "session_error", "Vibe answered the session request without a session id")
            ]
        self.session_id = session_id
        self._ready = True
        if plan.bridge:
            self._statuses = merge_statuses(self._statuses, {plan.bridge: "pending"})
        events: list[VendorEvent] = [self._session_event(obj)]
        if self._replayed:
            events.append(StatusEvent(raw={"replayedUpdates": self._replayed}, status="history"))
        modes = as_dict(result.get("modes"))
        current = as_str(modes.get("currentModeId"))
        available = [as_str(as_dict(m).get("id")) for m in as_list(modes.get("availableModes"))]
        if plan.mode is None or plan.mode == current:
            return events + self._send_prompt(obj)
        if available and plan.mode not in available:
            listed = ", ".join(m for m in available if m) or "none"
            events.append(
                self._fail(
                    obj,
                    "set_mode_error",
                    f"Vibe offers no session mode {plan.mode!r} (available: {listed}); the run was not started",
                )
            )
            return events
        params = {"sessionId": session_id, "modeId": plan.mode}
        events.append(
            StdinWriteEvent(raw=obj, lines=(encode_request(SET_MODE_ID, "session/set_mode", params),))
        )
        return events

    def _send_prompt(self, obj: JSON) -> list[VendorEvent]:
        if self.plan is None or self.session_id is None:
            return [self._fail(obj, "protocol_error", "session/prompt requested before the session exists")]
        self._prompt_sent = True
        params = {"sessionId": self.session_id, "prompt": self.plan.prompt}
        return [StdinWriteEvent(raw=obj, lines=(encode_request(PROMPT_ID, "session/prompt", params),))]

    def _prompt_response(self, obj: JSON, error: JSON | None, result: JSON) -> list[VendorEvent]:
        events = self._flush()
        events.extend(self._evidence(obj))
        if error is not None:
            events.append(self._fail(obj, "prompt_error", f"Vibe failed the prompt: {_error_text(error)}"))
            return events
        usage_obj = as_dict(result.get("usage"))
        final: Usage | None = None
        if usage_obj:
            events.extend(self._usage.prompt_result(obj, usage_obj))
            final = self._usage.emitted
        stop = as_str(result.get("stopReason")) or "unknown"
        errors: tuple[str, ...] = ()
        subtype = stop
        if self._usage.cancel_reason is not None:
            # over a cap: an error even when the turn ended before the cancel took effect
            subtype, reason = self._usage.cancel_reason
            errors = (reason,)
        elif stop not in SUCCESS_STOP_REASONS:
            errors = (f"Vibe ended the turn with stop reason {stop!r}",)
        self._finished = True
        events.append(
            ResultEvent(
                raw=obj,
                is_error=bool(errors),
                subtype=subtype,
                text=self._last_text,
                session_id=self.session_id,
                usage=final if final is not None else self._usage.emitted,
                cost_usd=self._usage.run_cost(),
                errors=errors,
            )
        )
        return events

    # ------------------------------------------------------------------ requests from the agent

    def _agent_request(self, obj: JSON, method: str) -> list[VendorEvent]:
        request_id = request_id_text(obj.get("id"))
        if method != "session/request_permission":
            return [
                StdinWriteEvent(
                    raw=obj,
                    lines=(
                        encode_control_error(
                            request_id, f"Octipus does not serve {method} (no such client capability)"
                        ),
                    ),
                ),
                UnknownEvent(raw=obj, type=method),
            ]
        events = self._flush()
        events.extend(self._evidence(obj))
        params = as_dict(obj.get("params"))
        tool_call = as_dict(params.get("toolCall"))
        tool_use_id = as_str(tool_call.get("toolCallId"))
        known = self._tools.get(tool_use_id or "")
        if known is not None:
            name, tool_input = known.name, known.input
        else:
            name, tool_input = self._tool_identity(tool_call)
        events.append(
            PermissionRequestEvent(
                raw=obj,
                request_id=request_id,
                tool_name=name or "unknown",
                input=tool_input,
                tool_use_id=tool_use_id,
            )
        )
        return events

    # ------------------------------------------------------------------ notifications

    def _notification(self, obj: JSON, method: str) -> list[VendorEvent]:
        if method != "session/update":
            return [StatusEvent(raw=obj, status=method)]
        update = as_dict(as_dict(obj.get("params")).get("update"))
        kind = as_str(update.get("sessionUpdate")) or "unknown"
        if kind == "usage_update":
            return self._usage_update(obj, update)
        if not self._ready:
            # a session/load replaying the old conversation: counted, not stored again
            self._replayed += 1
            return []
        handler = self._update_handlers.get(kind)
        if handler is not None:
            return handler(self, obj, update)
        events = [] if kind in PASSIVE_UPDATES else self._flush()
        if kind in PASSIVE_UPDATES or kind in ("user_message_chunk", "plan"):
            events.append(StatusEvent(raw=obj, status=kind))
        else:
            events.append(UnknownEvent(raw=obj, type=f"session/update:{kind}"))
        return events

    def _message_chunk(self, obj: JSON, update: JSON) -> list[VendorEvent]:
        text = as_str(as_dict(update.get("content")).get("text")) or ""
        message_id = as_str(update.get("messageId"))
        if is_mcp_notice(text) and message_id != self._text_id:
            return self._mcp_notice(obj, text)
        events: list[VendorEvent] = []
        if message_id != self._text_id or self._thought:
            events.extend(self._flush())
            self._text_id = message_id
        self._text.append(text)
        if message_id is None or message_id.startswith("assistant-"):
            events.extend(self._evidence(obj))
        return events

    def _thought_chunk(self, obj: JSON, update: JSON) -> list[VendorEvent]:
        text = as_str(as_dict(update.get("content")).get("text")) or ""
        message_id = as_str(update.get("messageId"))
        events: list[VendorEvent] = []
        if message_id != self._thought_id or self._text:
            events.extend(self._flush())
            self._thought_id = message_id
        self._thought.append(text)
        events.extend(self._evidence(obj))
        return events

    def _tool_call(self, obj: JSON, update: JSON) -> list[VendorEvent]:
        events = self._flush()
        events.extend(self._evidence(obj))
        tool_use_id = as_str(update.get("toolCallId")) or ""
        call = self._tools.get(tool_use_id)
        if call is None:
            name, tool_input = self._tool_identity(update)
            call = _ToolCall(name=name, input=tool_input)
            self._tools[tool_use_id] = call
        if not call.announced:
            call.announced = True
            events.append(ToolUseEvent(raw=obj, tool_use_id=tool_use_id, name=call.name, input=call.input))
        events.extend(self._tool_result(obj, update, tool_use_id, call))
        return events

    def _tool_call_update(self, obj: JSON, update: JSON) -> list[VendorEvent]:
        events = self._flush()
        tool_use_id = as_str(update.get("toolCallId")) or ""
        call = self._tools.get(tool_use_id)
        if call is None:
            return events + self._tool_call(obj, update)
        if "rawInput" in update and not call.input:
            call.input = as_dict(update.get("rawInput"))
        events.extend(self._tool_result(obj, update, tool_use_id, call))
        if not events:
            events.append(StatusEvent(raw=obj, status="tool_call_update"))
        return events

    def _tool_result(self, obj: JSON, update: JSON, tool_use_id: str, call: _ToolCall) -> list[VendorEvent]:
        status = as_str(update.get("status"))
        if status not in ("completed", "failed") or call.finished:
            return []
        call.finished = True
        content = _content_text(update.get("content"))
        if not content and update.get("rawOutput") is not None:
            content = to_text(update.get("rawOutput"))
        bridge = self.plan.bridge if self.plan else None
        events: list[VendorEvent] = []
        if bridge and status == "completed" and call.name.startswith(f"mcp__{bridge}__"):
            events.extend(self._evidence(obj))
        events.append(
            ToolResultEvent(raw=obj, tool_use_id=tool_use_id, content=content, is_error=status == "failed")
        )
        return events

    _update_handlers: Mapping[str, Callable[[AcpParser, JSON, JSON], list[VendorEvent]]] = {
        "agent_message_chunk": _message_chunk,
        "agent_thought_chunk": _thought_chunk,
        "tool_call": _tool_call,
        "tool_call_update": _tool_call_update,
    }

    def _usage_update(self, obj: JSON, update: JSON) -> list[VendorEvent]:
        events = self._usage.update(obj, update, prompt_sent=self._prompt_sent)
        if events is None:
            return []  # the session's past, not this run
        events.extend(self._check_limits(obj))
        return events

    def _check_limits(self, obj: JSON) -> list[VendorEvent]:
        """``session/cancel`` once, when the run passes the plan's turn or token cap."""
        plan = self.plan
        if plan is None or self.session_id is None or self._finished:
            return []
        if not self._usage.passes_cap(plan.turn_limit, plan.token_limit):
            return []
        return [StdinWriteEvent(raw=obj, lines=(encode_cancel(self.session_id),))]

    # ------------------------------------------------------------------ helpers

    def _tool_identity(self, update: JSON) -> tuple[str, JSON]:
        meta = as_dict(update.get("_meta"))
        name = as_str(meta.get("tool_name"))
        if not name:
            title = as_str(update.get("title")) or ""
            name = title.split(":", 1)[0].strip() or as_str(update.get("kind")) or "unknown"
        return vendor_tool_name(name), as_dict(update.get("rawInput"))

    def _flush(self) -> list[VendorEvent]:
        events: list[VendorEvent] = []
        if self._text:
            text = "".join(self._text)
            raw = {
                "sessionUpdate": "agent_message_chunk",
                "messageId": self._text_id,
                "content": {"type": "text", "text": text},
            }
            events.append(TextEvent(raw=raw, text=text, message_id=self._text_id))
            self._last_text = text
            self._text = []
        if self._thought:
            text = "".join(self._thought)
            raw = {
                "sessionUpdate": "agent_thought_chunk",
                "messageId": self._thought_id,
                "content": {"type": "text", "text": text},
            }
            events.append(ThinkingEvent(raw=raw, text=text, message_id=self._thought_id))
            self._thought = []
        return events

    def _mcp_notice(self, obj: JSON, text: str) -> list[VendorEvent]:
        events = self._flush()
        statuses = mcp_statuses(text)
        bridge = self.plan.bridge if self.plan else None
        fatal = bridge is not None and bridge in statuses
        events.append(ErrorEvent(raw=obj, message=text, fatal=fatal))
        if statuses:
            self._statuses = merge_statuses(self._statuses, statuses)
            session = self._session_event(obj)
            events.append(session)
            if bridge is not None and bridge in statuses:
                failure = bridge_not_connected(session, bridge, "Mistral Vibe", "its MCP notice")
                events.extend([failure] if failure is not None else [])
        return events

    def _evidence(self, obj: JSON) -> list[VendorEvent]:
        """Report the bridge ``connected`` once the model turn demonstrably runs (class docstring)."""
        bridge = self.plan.bridge if self.plan else None
        if self._connected_reported or not bridge or self._statuses.get(bridge) != "pending":
            return []
        self._connected_reported = True
        self._statuses[bridge] = "connected"
        return [self._session_event(obj)]

    def _session_event(self, obj: JSON) -> SessionEvent:
        return SessionEvent(raw=obj, session_id=self.session_id, mcp_servers=dict(self._statuses))

    def _fail(self, obj: JSON, subtype: str, message: str, *, session_id: str | None = None) -> ResultEvent:
        self._finished = True
        return ResultEvent(
            raw=obj,
            is_error=True,
            subtype=subtype,
            text=None,
            session_id=session_id or self.session_id,
            usage=self._usage.emitted,
            cost_usd=self._usage.run_cost(),
            errors=(message,),
        )
