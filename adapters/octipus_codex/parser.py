"""Parsing Codex output into typed Octipus events, for both transports.

One :class:`CodexStreamParser` reads one process's stdout, one complete line per
:meth:`~CodexStreamParser.feed` call, and recognises the transport per line: a JSON object with a
``method`` or an ``id`` is app-server JSON-RPC (observed-2.md §1), one with a ``type`` is a
``codex exec --json`` event (observed.md §2.3). Every event keeps the line's decoded object as
``raw``.

Tool names and the item and approval-request events are :mod:`octipus_codex.items`'s; usage is
counted by :mod:`octipus_codex.usage` (this turn's own figures on both transports).

app-server (JSON-RPC) ->  events
---------------------------------
=============================================  ==============================================
line                                           events
=============================================  ==============================================
response to ``initialize``                     :class:`StatusEvent` ``initialized``
response to ``config/read``                    :class:`StdinWriteEvent`: ``thread/start`` or
                                               ``thread/resume`` with the user's other MCP
                                               servers switched off
response to the thread request                 [:class:`StatusEvent` ``cold_start`` when a
                                               resume answered another thread id],
                                               [:class:`SessionEvent`], :class:`StdinWriteEvent`
                                               ``turn/start``; an error gives
                                               [:class:`SessionEvent` with the bridge
                                               ``failed`` + :class:`RunFailureEvent`] +
                                               :class:`ResultEvent` (error)
response to ``turn/start``                     buffered usage of the turn, if any; an error
                                               gives :class:`ResultEvent` (error)
``mcpServer/startupStatus/updated``            [:class:`ErrorEvent`], then the
                                               :class:`SessionEvent` once the thread id and the
                                               bridge's final status are known, followed by a
                                               :class:`RunFailureEvent` when the bridge is not
                                               ``connected`` (also when the session is only
                                               announced at ``turn/completed``)
``item/started`` / ``item/completed``          :class:`ToolUseEvent` / :class:`ToolResultEvent`
                                               for tool items, :class:`TextEvent` for a
                                               completed ``agentMessage``,
                                               :class:`ThinkingEvent` for ``reasoning``
``thread/tokenUsage/updated``                  :class:`UsageEvent` (see usage below)
``turn/completed``                             [:class:`SessionEvent` if not yet sent],
                                               :class:`ResultEvent` (``is_error`` unless
                                               ``status == "completed"``; subtype = status)
``error``                                      :class:`ErrorEvent` (``fatal`` = not
                                               ``willRetry``); the failure itself is the
                                               ``turn/completed`` that follows
``warning`` / ``configWarning`` /              :class:`ErrorEvent` (``fatal=False``): warnings
``deprecationNotice`` / ``guardianWarning``    are not failures
``serverRequest/resolved``                     :class:`ControlCancelEvent` (Codex no longer
                                               waits for that request)
approval requests (server -> client)           :class:`PermissionRequestEvent`
other server requests                          :class:`UnknownEvent` (type = method) +
                                               :class:`StdinWriteEvent` answering a JSON-RPC
                                               error, so Codex never waits on them
deltas, rate limits, thread status changes     nothing (the completed item carries the text)
other known notifications                      :class:`StatusEvent` (status = method)
anything else                                  :class:`UnknownEvent`
=============================================  ==============================================

exec (``--json``) -> events
---------------------------
``thread.started`` -> [:class:`StatusEvent` ``cold_start`` when it is not the thread the launch
resumed], :class:`SessionEvent` (``mcp_servers`` = ``{<bridge>: "connected"}`` when the launch has
a bridge: exec prints no MCP status, and Octipus configures its bridge with ``required = true``, so a
started thread means the bridge initialized; a failed bridge ends exec with rc 1 before
``thread.started``, observed.md §2.5); ``turn.started`` -> :class:`StatusEvent`; items as above
(``agent_message``, ``reasoning``, ``command_execution``, ``mcp_tool_call``, ``file_change``,
``web_search``; ``todo_list`` -> :class:`StatusEvent`; an ``error`` item -> :class:`ErrorEvent`
``fatal=False``: the "Model metadata ... not found" item is only a warning, observed.md §2.3);
``turn.completed`` -> :class:`UsageEvent` + :class:`ResultEvent`; ``turn.failed`` ->
:class:`ResultEvent` (error); a top-level ``error`` -> :class:`ErrorEvent` (``fatal=False``:
"Reconnecting... n/5" lines precede a real failure, which ``turn.failed`` reports).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from octipusd.adapter import (
    JSON,
    ControlCancelEvent,
    ErrorEvent,
    LaunchRequest,
    ResultEvent,
    RunFailureEvent,
    SessionEvent,
    StatusEvent,
    StdinWriteEvent,
    Steering,
    SteeringAckEvent,
    StreamParserDefaults,
    UnknownEvent,
    UnparsedLine,
    Usage,
    VendorEvent,
)
from octipusd.errors import AdapterError

from . import control, rpc
from ._coerce import as_dict, as_list, as_str, decode_line, load_object, to_text
from .items import ItemTranslator, server_request
from .launch import TRANSPORT_APP_SERVER, app_server_plan, transport_of
from .usage import UsageCounter

log = logging.getLogger("octipus_codex")

#: Name of the Octipus bridge as the exec parser reports it (``BridgeEndpoint.server_name``'s
#: default; exec prints nothing that names it).
DEFAULT_BRIDGE_NAME: Final = "octipus"

#: ``mcpServer/startupStatus/updated`` status -> the status vocabulary of
#: :attr:`SessionEvent.mcp_servers` (Claude's: ``connected``, ``failed``, ``needs-auth``,
#: ``pending``), which the runtime checks.
MCP_STATUSES: Final = {
    "starting": "pending",
    "ready": "connected",
    "failed": "failed",
    "cancelled": "failed",
}

#: Bridge statuses after which the session is announced.
_FINAL_MCP_STATUSES: Final = frozenset({"connected", "failed", "needs-auth"})

#: Text of the thread-start error when a ``required`` MCP server did not start (observed on
#: 0.171.0 with a wrong token and with the token variable unset).
REQUIRED_MCP_FAILED_TEXT: Final = "required MCP servers failed to initialize"

#: Notifications that carry nothing the item/turn events do not (streaming deltas, rate limits,
#: thread status flips); they produce no event.
_QUIET_NOTIFICATIONS: Final = frozenset(
    {
        "item/agentMessage/delta",
        "item/commandExecution/outputDelta",
        "item/commandExecution/terminalInteraction",
        "item/fileChange/outputDelta",
        "item/fileChange/patchUpdated",
        "item/reasoning/summaryTextDelta",
        "item/reasoning/summaryPartAdded",
        "item/reasoning/textDelta",
        "item/plan/delta",
        "item/mcpToolCall/progress",
        "account/rateLimits/updated",
        "thread/status/changed",
        "remoteControl/status/changed",
        "thread/readState/changed",
    }
)

#: Notifications reported as :class:`ErrorEvent` with ``fatal=False``, and the field of their
#: params holding the text.
_WARNINGS: Final = {
    "warning": "message",
    "configWarning": "summary",
    "deprecationNotice": "summary",
    "guardianWarning": "message",
}

#: Thread items that are not tool calls and are reported as a :class:`StatusEvent` when completed.


class CodexStreamParser(StreamParserDefaults):
    """Stateful parser of one Codex process's stdout (app-server JSON-RPC or exec JSONL).

    Implements :class:`octipusd.adapter.StreamParser`. Not thread-safe; one per run. See the
    module docstring for the line -> event tables and the usage rules.

    Args:
        request: The launch this output belongs to (``Adapter.new_parser(request)``). For an
            app-server run it is what the parser's requests are built from (the thread request
            after ``config/read``, ``turn/start`` after the thread); it also names the bridge, the
            thread a resume asked for and, for a resumed exec run, the thread's usage before this
            turn (``thread_usage``). None (tests of recorded streams) parses only: no requests
            are sent, and an exec ``thread.started`` reports the default bridge name connected.
    """

    def __init__(self, request: LaunchRequest | None = None) -> None:
        self._plan: rpc.Plan | None = None
        self._exec_bridge: str | None = DEFAULT_BRIDGE_NAME
        self._requested: str | None = None
        thread_usage = Usage()  # the thread's exec usage already counted (tokens)
        if request is not None:
            self._requested = request.vendor_session_id if request.resume else None
            if self._requested is not None and request.thread_usage is not None:
                thread_usage = request.thread_usage
            self._exec_bridge = request.bridge.server_name if request.bridge is not None else None
            try:
                if transport_of(request.options) == TRANSPORT_APP_SERVER:
                    self._plan = app_server_plan(request)
            except AdapterError:  # build_launch refused it already; parse what comes
                self._plan = None
        self._thread_id: str | None = None
        self._model: str | None = None
        self._bridge: str | None = None
        self._plan_seen = False
        self._mcp: dict[str, str] = {}
        self._announced = False
        self._turn_id: str | None = None
        self._turn_done = False
        self._steer_count = 0
        self._steers: dict[str, str] = {}  # turn/steer request id -> its guidance, until answered
        self._usage = UsageCounter(thread_usage)
        self._items = ItemTranslator()
        self._rpc_notifications: dict[str, Callable[[JSON, JSON], list[VendorEvent]]] = {
            "mcpServer/startupStatus/updated": self._mcp_status,
            "thread/started": self._thread_started,
            "turn/started": self._turn_started,
            "item/started": self._item_started,
            "item/completed": self._item_completed,
            "thread/tokenUsage/updated": self._token_usage,
            "turn/completed": self._turn_completed,
            "error": self._error_notification,
            "serverRequest/resolved": self._request_resolved,
        }
        self._exec_handlers: dict[str, Callable[[JSON], list[VendorEvent]]] = {
            "thread.started": self._exec_thread_started,
            "turn.started": self._exec_turn_started,
            "item.started": self._items.exec_item,
            "item.updated": self._items.exec_item,
            "item.completed": self._items.exec_item,
            "turn.completed": self._exec_turn_completed,
            "turn.failed": self._exec_turn_failed,
            "error": self._exec_error,
        }

    # ------------------------------------------------------------------ public

    @property
    def thread_id(self) -> str | None:
        """The Codex thread id once known (the vendor session id), else None."""
        return self._thread_id

    def feed(self, line: bytes) -> list[VendorEvent]:
        """Parse one complete stdout line (without its newline) into events.

        Args:
            line: The raw line, any length, any bytes.

        Returns:
            Zero or more events, in stream order (module docstring).

        Never raises on vendor input: bytes that are not UTF-8 are decoded with replacement
        characters, text that is not a JSON object becomes :class:`UnparsedLine`, and an object
        of an unexpected shape becomes :class:`UnknownEvent`.
        """
        text = decode_line(line)
        obj = load_object(text)
        if obj is None:
            return [UnparsedLine(raw=None, text=text)]
        try:
            if isinstance(obj.get("method"), str) or "id" in obj:
                return self._rpc(obj)
            kind = as_str(obj.get("type"))
            handler = self._exec_handlers.get(kind) if kind is not None else None
            if handler is None:
                return [UnknownEvent(raw=obj, type=kind)]
            return handler(obj)
        except Exception:  # last resort, logged: an unforeseen shape must not kill the run
            kind = as_str(obj.get("method")) or as_str(obj.get("type"))
            log.exception("Codex %s line of an unforeseen shape, kept as an unknown event", kind)
            return [UnknownEvent(raw=obj, type=kind)]

    def total_usage(self) -> Usage:
        """Usage of the run so far (tokens): the sum of every :class:`UsageEvent` emitted."""
        return self._usage.total

    def finish(self, exit_code: int | None) -> list[VendorEvent]:
        """Nothing is buffered; a run that ended without a result is reported by the runtime."""
        return []

    # ------------------------------------------------------------------ JSON-RPC

    def _rpc(self, obj: JSON) -> list[VendorEvent]:
        method = as_str(obj.get("method"))
        if method is not None and "id" in obj:
            return server_request(obj, method, self._items.file_changes)
        if method is not None:
            handler = self._rpc_notifications.get(method)
            params = as_dict(obj.get("params"))
            if handler is not None:
                return handler(obj, params)
            if method in _QUIET_NOTIFICATIONS:
                return []
            field = _WARNINGS.get(method)
            if field is not None:
                message = as_str(params.get(field)) or to_text(params)
                details = as_str(params.get("details"))
                return [
                    ErrorEvent(raw=obj, message=message + (f": {details}" if details else ""), fatal=False)
                ]
            return [StatusEvent(raw=obj, status=method)]
        return self._response(obj)

    def steer(self, text: str) -> Steering | None:
        """Guidance into the running app-server turn: ``turn/steer`` with the thread and the
        expected turn id (schema generated by the binary, ``TurnSteerParams``); it joins the
        running turn; the response acknowledges it (:class:`SteeringAckEvent`) or refuses it
        (the guidance stays for a follow-up). None for ``exec`` (no live stdin) or before
        the turn started or after it completed."""
        if self._plan is None or self._thread_id is None or self._turn_id is None or self._turn_done:
            return None
        self._steer_count += 1
        request_id = f"octipus/turn/steer/{self._steer_count}"
        self._steers[request_id] = text
        params = {
            "threadId": self._thread_id,
            "expectedTurnId": self._turn_id,
            "input": [{"type": "text", "text": text}],
        }
        return Steering(lines=(rpc.request(request_id, "turn/steer", params),))

    def _response(self, obj: JSON) -> list[VendorEvent]:
        request_id = obj.get("id")
        error = obj.get("error")
        failed = error is not None
        message = as_str(as_dict(error).get("message")) or to_text(error)
        result = as_dict(obj.get("result"))
        if request_id == rpc.INITIALIZE_ID:
            if failed:
                return [self._failure(obj, "initialize_failed", message)]
            return [StatusEvent(raw=obj, status="initialized")]
        if request_id == rpc.TURN_START_ID:
            if failed:
                return [self._failure(obj, "turn_start_failed", message)]
            turn_id = as_str(as_dict(result.get("turn")).get("id"))
            return self._learn_turn(turn_id)
        if request_id == rpc.CONFIG_READ_ID and self._plan is not None:
            plan = self._plan
            servers = as_dict(as_dict(result.get("config")).get("mcp_servers"))
            others = tuple(name for name in servers if isinstance(name, str) and name != plan.bridge)
            return [StdinWriteEvent(raw=None, lines=(rpc.thread_request(plan, others),))]
        if request_id == rpc.THREAD_ID:
            return self._thread_response(obj, result, message if failed else None)
        if isinstance(request_id, str) and request_id in self._steers:
            text = self._steers.pop(request_id)
            if failed:  # e.g. the turn ended meanwhile: the guidance did not reach it
                return [
                    ErrorEvent(raw=obj, message=f"turn/steer refused: {message}", fatal=False),
                    SteeringAckEvent(raw=obj, text=text, refused=message),
                ]
            return [
                StatusEvent(raw=obj, status="turn/steer accepted"),
                SteeringAckEvent(raw=obj, text=text),
            ]
        return [UnknownEvent(raw=obj, type="response")]

    def _failure(self, obj: JSON, subtype: str, message: str, session_id: str | None = None) -> ResultEvent:
        return ResultEvent(
            raw=obj,
            is_error=True,
            subtype=subtype,
            session_id=session_id,
            usage=self._usage.turn,
            errors=(message,),
        )

    def _thread_response(self, obj: JSON, result: JSON, error: str | None) -> list[VendorEvent]:
        plan = self._plan
        bridge = plan.bridge if plan is not None else None
        self._bridge = bridge
        self._plan_seen = plan is not None
        method = plan.thread_method if plan is not None else "the thread request"
        subtype = "resume_failed" if method == "thread/resume" else "thread_start_failed"
        if error is not None:
            events: list[VendorEvent] = []
            if bridge is not None and REQUIRED_MCP_FAILED_TEXT in error and bridge in error:
                self._mcp[bridge] = "failed"
                self._announced = True
                events.extend(
                    self._session(SessionEvent(raw=obj, session_id=None, mcp_servers=dict(self._mcp)))
                )
            events.append(self._failure(obj, subtype, error, session_id=self._requested))
            return events
        thread_id = as_str(as_dict(result.get("thread")).get("id"))
        if not thread_id:
            return [self._failure(obj, subtype, f"Codex answered {method} without a thread id")]
        self._thread_id = thread_id
        self._model = as_str(result.get("model"))
        events = self._cold_start(obj, thread_id)
        events.extend(self._announce(obj))
        if plan is not None:
            events.append(StdinWriteEvent(raw=None, lines=(rpc.turn_request(plan, thread_id),)))
        return events

    def _cold_start(self, obj: JSON, thread_id: str | None) -> list[VendorEvent]:
        """A :class:`StatusEvent` when a resume was answered with another thread (seed 003 "Cold
        fallback"; the :class:`SessionEvent` that follows carries the new id, which the runtime saves)."""
        if self._requested is None or thread_id is None or thread_id == self._requested:
            return []
        return [
            StatusEvent(
                raw=obj,
                status=(
                    f"cold_start: resuming Codex thread {self._requested} gave thread {thread_id}; this turn "
                    "starts a new Codex conversation instead of continuing the stored one"
                ),
            )
        ]

    def _announce(self, obj: JSON, *, final: bool = False) -> list[VendorEvent]:
        """The :class:`SessionEvent`, once: when the thread id and the bridge's final status are known
        (``final``: at the end of the turn, with whatever is known)."""
        if self._announced or self._thread_id is None:
            return []
        if not final:
            if not self._plan_seen:
                return []
            if self._bridge is not None and self._mcp.get(self._bridge) not in _FINAL_MCP_STATUSES:
                return []
        self._announced = True
        return self._session(
            SessionEvent(raw=obj, session_id=self._thread_id, model=self._model, mcp_servers=dict(self._mcp))
        )

    def _session(self, event: SessionEvent) -> list[VendorEvent]:
        """The announcement, plus the run's failure when the bridge of the launch is not ``connected``."""
        reason = control.mcp_failure(event, self._bridge) if self._bridge is not None else None
        return [event] if reason is None else [event, RunFailureEvent(raw=event.raw, reason=reason)]

    def _mcp_status(self, obj: JSON, params: JSON) -> list[VendorEvent]:
        name = as_str(params.get("name"))
        status = as_str(params.get("status"))
        if name is None or status is None:
            return [UnknownEvent(raw=obj, type="mcpServer/startupStatus/updated")]
        mapped = MCP_STATUSES.get(status, status)
        if params.get("failureReason") == "reauthenticationRequired":
            mapped = "needs-auth"
        self._mcp[name] = mapped
        events: list[VendorEvent] = []
        error = as_str(params.get("error"))
        if error:
            events.append(ErrorEvent(raw=obj, message=f"MCP server {name!r} {status}: {error}", fatal=False))
        if not self._announced:
            events.extend(self._announce(obj))
        if not events:
            events.append(StatusEvent(raw=obj, status=f"mcp {name}: {status}"))
        return events

    def _thread_started(self, obj: JSON, params: JSON) -> list[VendorEvent]:
        if self._thread_id is None:
            self._thread_id = as_str(as_dict(params.get("thread")).get("id"))
        return [StatusEvent(raw=obj, status="thread/started")]

    def _turn_started(self, obj: JSON, params: JSON) -> list[VendorEvent]:
        turn_id = as_str(as_dict(params.get("turn")).get("id"))
        return [StatusEvent(raw=obj, status="turn/started"), *self._learn_turn(turn_id)]

    def _learn_turn(self, turn_id: str | None) -> list[VendorEvent]:
        """Record this run's turn id (first one wins) and count the usage held for it."""
        if self._turn_id is not None or turn_id is None:
            return []
        self._turn_id = turn_id
        return self._usage.release(turn_id)

    def _token_usage(self, obj: JSON, params: JSON) -> list[VendorEvent]:
        return self._usage.notification(obj, as_str(params.get("turnId")), self._turn_id)

    def _turn_completed(self, obj: JSON, params: JSON) -> list[VendorEvent]:
        turn = as_dict(params.get("turn"))
        turn_id = as_str(turn.get("id"))
        if self._turn_id is not None and turn_id is not None and turn_id != self._turn_id:
            return [StatusEvent(raw=obj, status="turn/completed (another turn)")]
        events = self._learn_turn(turn_id)
        self._turn_done = True
        status = as_str(turn.get("status")) or "unknown"
        error = turn.get("error")
        errors: tuple[str, ...] = ()
        if error is not None:
            errors = (as_str(as_dict(error).get("message")) or to_text(error),)
        elif status == "interrupted":
            errors = ("the Codex turn was interrupted",)
        text = self._items.last_text
        for item in as_list(turn.get("items")):
            entry = as_dict(item)
            if entry.get("type") == "agentMessage" and as_str(entry.get("text")):
                text = as_str(entry.get("text"))
        events.extend(self._announce(obj, final=True))
        events.append(
            ResultEvent(
                raw=obj,
                is_error=status != "completed",
                subtype=status,
                text=text,
                session_id=self._thread_id,
                usage=self._usage.turn,
                errors=errors,
            )
        )
        return events

    def _error_notification(self, obj: JSON, params: JSON) -> list[VendorEvent]:
        error = params.get("error")
        message = as_str(as_dict(error).get("message")) or to_text(error)
        return [ErrorEvent(raw=obj, message=message, fatal=params.get("willRetry") is not True)]

    def _request_resolved(self, obj: JSON, params: JSON) -> list[VendorEvent]:
        if "requestId" not in params:
            return [UnknownEvent(raw=obj, type="serverRequest/resolved")]
        return [ControlCancelEvent(raw=obj, request_id=rpc.request_id_text(params.get("requestId")))]

    # ------------------------------------------------------------------ items (both transports)

    def _item_started(self, obj: JSON, params: JSON) -> list[VendorEvent]:
        return self._items.item(obj, as_dict(params.get("item")), completed=False)

    def _item_completed(self, obj: JSON, params: JSON) -> list[VendorEvent]:
        return self._items.item(obj, as_dict(params.get("item")), completed=True)

    def _exec_thread_started(self, obj: JSON) -> list[VendorEvent]:
        thread_id = as_str(obj.get("thread_id"))
        self._thread_id = thread_id
        if self._requested is not None and thread_id != self._requested:
            self._usage.new_thread()
        if self._announced:
            return [StatusEvent(raw=obj, status="thread.started")]
        self._announced = True
        servers = {self._exec_bridge: "connected"} if self._exec_bridge is not None else {}
        return [
            *self._cold_start(obj, thread_id),
            SessionEvent(raw=obj, session_id=thread_id, mcp_servers=servers),
        ]

    def _exec_turn_started(self, obj: JSON) -> list[VendorEvent]:
        return [StatusEvent(raw=obj, status="turn.started")]

    def _exec_turn_completed(self, obj: JSON) -> list[VendorEvent]:
        turn, events = self._usage.exec_turn(obj)
        events.append(
            ResultEvent(
                raw=obj,
                is_error=False,
                subtype="completed",
                text=self._items.last_text,
                session_id=self._thread_id,
                usage=turn,
            )
        )
        self._items.last_text = None
        return events

    def _exec_turn_failed(self, obj: JSON) -> list[VendorEvent]:
        error = obj.get("error")
        message = as_str(as_dict(error).get("message")) or to_text(error)
        return [
            ResultEvent(
                raw=obj,
                is_error=True,
                subtype="failed",
                text=self._items.last_text,
                session_id=self._thread_id,
                errors=(message,),
            )
        ]

    def _exec_error(self, obj: JSON) -> list[VendorEvent]:
        return [ErrorEvent(raw=obj, message=as_str(obj.get("message")) or to_text(obj), fatal=False)]
