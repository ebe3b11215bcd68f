"""Codex thread items and approval requests -> Octipus events, for both transports.

Tool names (the ``<Tool>`` of ``cli-native:<Tool>`` rules) are the app-server item types, for
both transports: ``commandExecution`` (input ``command`` = the model's command without Codex's
``/bin/bash -lc`` wrapper, ``cwd``, and ``rawCommand`` when a wrapper was removed),
``fileChange`` (``changes``, ``path`` = the first changed path), ``permissions``, and
``mcp__<server>__<tool>`` for MCP tools (as Claude names them, so the runtime recognises its own
bridge's tools). Other tool items (``webSearch``, ``dynamicToolCall``, ...) keep their item type.

:class:`ItemTranslator` turns ``item/started`` / ``item/completed`` (app-server) and
``item.*`` (exec) into :class:`ToolUseEvent` / :class:`ToolResultEvent`, :class:`TextEvent` and
:class:`ThinkingEvent`; :func:`server_request` turns Codex's requests to the client into
:class:`PermissionRequestEvent` (approvals) or an error answer on stdin (anything else).
"""

from __future__ import annotations

import shlex
from typing import Final

from octipusd.adapter import (
    JSON,
    ErrorEvent,
    PermissionRequestEvent,
    StatusEvent,
    StdinWriteEvent,
    TextEvent,
    ThinkingEvent,
    ToolResultEvent,
    ToolUseEvent,
    UnknownEvent,
    VendorEvent,
)

from . import rpc
from ._coerce import as_dict, as_list, as_str, flatten_content, to_text

_STATUS_ITEMS: Final = frozenset(
    {
        "plan",
        "contextCompaction",
        "enteredReviewMode",
        "exitedReviewMode",
        "hookPrompt",
        "subAgentActivity",
        "functionCallOutput",
        "todo_list",
    }
)

#: exec item types (snake_case) -> the app-server item type used as the tool name.
_EXEC_ITEM_TYPES: Final = {
    "command_execution": "commandExecution",
    "mcp_tool_call": "mcpToolCall",
    "file_change": "fileChange",
    "web_search": "webSearch",
    "agent_message": "agentMessage",
    "reasoning": "reasoning",
    "collab_tool_call": "collabAgentToolCall",
}


def command_input(command: str, cwd: object) -> JSON:
    """The :class:`ToolUseEvent` / :class:`PermissionRequestEvent` input of a command.

    Args:
        command: The command as Codex reports it (``/bin/bash -lc '<cmd>'``).
        cwd: Its working directory, if known.

    Returns:
        ``{"command": <cmd without the shell wrapper>, ["cwd": <cwd>], ["rawCommand": <command>]}``;
        ``rawCommand`` only when a wrapper was removed (:func:`octipus_codex.rpc.unwrap_shell`).
    """
    inner = rpc.unwrap_shell(command)
    data: JSON = {"command": inner}
    if isinstance(cwd, str) and cwd:
        data["cwd"] = cwd
    if inner != command:
        data["rawCommand"] = command
    return data


def _changes_input(changes: object) -> JSON:
    data: JSON = {"changes": changes}
    for change in as_list(changes):
        path = as_str(as_dict(change).get("path"))
        if path:
            data["path"] = path
            break
    return data


def _mcp_name(server: object, tool: object) -> str:
    return f"mcp__{as_str(server) or ''}__{as_str(tool) or ''}"


def _arguments(value: object) -> JSON:
    if isinstance(value, dict):
        return value
    if value is None:
        return {}
    return {"arguments": value}


class ItemTranslator:
    """The thread items of one run -> events (state kept across lines: one per parser).

    Attributes:
        started: Item ids whose :class:`ToolUseEvent` was emitted (once per item).
        file_changes: ``fileChange`` inputs by item id (a file-change approval names only the item).
        last_text: The last completed ``agentMessage`` text (the turn's result text).
    """

    def __init__(self) -> None:
        self.started: set[str] = set()
        self.file_changes: dict[str, JSON] = {}
        self.last_text: str | None = None

    def _tool(self, obj: JSON, item_id: str, name: str, data: JSON) -> list[VendorEvent]:
        """The :class:`ToolUseEvent` of an item, once per item id (started, or completed alone)."""
        if item_id and item_id in self.started:
            return []
        if item_id:
            self.started.add(item_id)
        return [ToolUseEvent(raw=obj, tool_use_id=item_id, name=name, input=data)]

    def item(self, obj: JSON, item: JSON, *, completed: bool) -> list[VendorEvent]:
        """The events of one app-server item (an exec item once :meth:`exec_item` renamed its type)."""
        kind = as_str(item.get("type"))
        item_id = as_str(item.get("id")) or ""
        status = as_str(item.get("status"))
        if kind == "agentMessage":
            text = as_str(item.get("text"))
            if not completed or not text:
                return []
            self.last_text = text
            return [TextEvent(raw=obj, text=text, message_id=item_id or None)]
        if kind == "reasoning":
            parts = [
                p
                for p in (*as_list(item.get("summary")), *as_list(item.get("content")))
                if isinstance(p, str)
            ]
            text = as_str(item.get("text")) or "\n".join(parts)
            return (
                [ThinkingEvent(raw=obj, text=text, message_id=item_id or None)] if completed and text else []
            )
        if kind == "userMessage":
            return []
        if kind == "commandExecution":
            command = as_str(item.get("command")) or ""
            events = self._tool(obj, item_id, "commandExecution", command_input(command, item.get("cwd")))
            if completed:
                output = as_str(item.get("aggregatedOutput"))
                if output is None:
                    output = as_str(item.get("aggregated_output")) or ""
                exit_code = item.get("exitCode", item.get("exit_code"))
                failed = status not in (None, "completed") or (isinstance(exit_code, int) and exit_code != 0)
                if not output and status == "declined":
                    output = "declined"
                events.append(ToolResultEvent(raw=obj, tool_use_id=item_id, content=output, is_error=failed))
            return events
        if kind == "mcpToolCall":
            name = _mcp_name(item.get("server"), item.get("tool"))
            events = self._tool(obj, item_id, name, _arguments(item.get("arguments")))
            if completed:
                error = item.get("error")
                result = as_dict(item.get("result"))
                if error is not None:
                    content = as_str(as_dict(error).get("message")) or to_text(error)
                else:
                    content = flatten_content(result.get("content"))
                failed = error is not None or status == "failed"
                events.append(ToolResultEvent(raw=obj, tool_use_id=item_id, content=content, is_error=failed))
            return events
        if kind == "fileChange":
            data = _changes_input(item.get("changes"))
            self.file_changes[item_id] = data
            events = self._tool(obj, item_id, "fileChange", data)
            if completed:
                failed = status in ("failed", "declined")
                events.append(
                    ToolResultEvent(raw=obj, tool_use_id=item_id, content=status or "", is_error=failed)
                )
            return events
        if kind in _STATUS_ITEMS:
            return [StatusEvent(raw=obj, status=f"item:{kind}")] if completed else []
        if kind in (
            "webSearch",
            "dynamicToolCall",
            "collabAgentToolCall",
            "imageView",
            "imageGeneration",
            "sleep",
        ):
            data = {k: v for k, v in item.items() if k not in ("id", "type", "status")}
            events = self._tool(obj, item_id, kind, data)
            if completed:
                detail = item.get("result", item.get("contentItems", item.get("action")))
                failed = status in ("failed", "declined") or item.get("success") is False
                events.append(
                    ToolResultEvent(
                        raw=obj,
                        tool_use_id=item_id,
                        content="" if detail is None else to_text(detail),
                        is_error=failed,
                    )
                )
            return events
        return [UnknownEvent(raw=obj, type=f"item/{'completed' if completed else 'started'}")]

    # ------------------------------------------------------------------ server requests

    def exec_item(self, obj: JSON, /) -> list[VendorEvent]:
        """The events of an exec ``item.started`` / ``item.updated`` / ``item.completed`` line."""
        phase = as_str(obj.get("type")) or "item.completed"
        item = dict(as_dict(obj.get("item")))
        kind = as_str(item.get("type"))
        completed = phase == "item.completed"
        if kind == "error":
            message = as_str(item.get("message")) or to_text(item)
            return [ErrorEvent(raw=obj, message=message, fatal=False)] if completed else []
        if kind == "todo_list":
            return [StatusEvent(raw=obj, status="item:todo_list")]
        if phase == "item.updated":
            return []
        if kind is None or kind not in _EXEC_ITEM_TYPES:
            return [UnknownEvent(raw=obj, type=phase)]
        item["type"] = _EXEC_ITEM_TYPES[kind]
        if kind == "mcp_tool_call":
            result = as_dict(item.get("result"))
            if result:
                item["result"] = {
                    "content": result.get("content"),
                    "structuredContent": result.get("structured_content"),
                }
        if kind == "file_change":
            completed = True  # exec emits file changes only once, completed (sources.md §2.3)
        if kind == "reasoning" and not completed:
            return []
        return self.item(obj, item, completed=completed)


def server_request(obj: JSON, method: str, file_changes: dict[str, JSON]) -> list[VendorEvent]:
    """A request of Codex to the client -> a :class:`PermissionRequestEvent` for an approval, or an
    :class:`UnknownEvent` plus a :class:`StdinWriteEvent` answering it (so Codex never waits on it).

    Args:
        obj: The request line.
        method: Its method.
        file_changes: The run's ``fileChange`` inputs by item id (:attr:`ItemTranslator.file_changes`).
    """
    request_id = obj.get("id")
    rid = rpc.request_id_text(request_id)
    params = as_dict(obj.get("params"))
    item_id = as_str(params.get("itemId"))
    if method == "item/commandExecution/requestApproval":
        data = command_input(as_str(params.get("command")) or "", params.get("cwd"))
        if not params.get("command"):
            data.pop("command", None)
        for key in ("reason", "kind"):
            value = as_str(params.get(key))
            if value and not (key == "kind" and value == "command"):
                data[key] = value
        return [
            PermissionRequestEvent(
                raw=obj, request_id=rid, tool_name="commandExecution", input=data, tool_use_id=item_id
            )
        ]
    if method == "item/fileChange/requestApproval":
        data = dict(file_changes.get(item_id or "", {}))
        for key in ("reason", "grantRoot"):
            value = as_str(params.get(key))
            if value:
                data[key] = value
        return [
            PermissionRequestEvent(
                raw=obj, request_id=rid, tool_name="fileChange", input=data, tool_use_id=item_id
            )
        ]
    if method == "item/permissions/requestApproval":
        data = {"permissions": params.get("permissions")}
        for key in ("cwd", "reason"):
            value = as_str(params.get(key))
            if value:
                data[key] = value
        return [
            PermissionRequestEvent(
                raw=obj, request_id=rid, tool_name="permissions", input=data, tool_use_id=item_id
            )
        ]
    if method == "mcpServer/elicitation/request":
        meta = as_dict(params.get("_meta"))
        tool = as_str(meta.get("tool_name"))
        if meta.get("codex_approval_kind") == "mcp_tool_call" and tool:
            name = _mcp_name(params.get("serverName"), tool)
            return [
                PermissionRequestEvent(
                    raw=obj, request_id=rid, tool_name=name, input=_arguments(meta.get("tool_params"))
                )
            ]
        # an MCP server's own question (a form or a URL): Octipus cannot fill it in
        answer = rpc.response(request_id, {"action": "decline", "content": None, "_meta": None})
        return [UnknownEvent(raw=obj, type=method), StdinWriteEvent(raw=None, lines=(answer,))]
    if method == "execCommandApproval":
        argv = [a for a in as_list(params.get("command")) if isinstance(a, str)]
        data = command_input(shlex.join(argv), params.get("cwd"))
        reason = as_str(params.get("reason"))
        if reason:
            data["reason"] = reason
        return [
            PermissionRequestEvent(
                raw=obj,
                request_id=rid,
                tool_name="commandExecution",
                input=data,
                tool_use_id=as_str(params.get("callId")),
            )
        ]
    if method == "applyPatchApproval":
        changes = as_dict(params.get("fileChanges"))
        data = {"changes": changes}
        first = next((k for k in changes if isinstance(k, str)), None)
        if first:
            data["path"] = first
        reason = as_str(params.get("reason"))
        if reason:
            data["reason"] = reason
        return [
            PermissionRequestEvent(
                raw=obj,
                request_id=rid,
                tool_name="fileChange",
                input=data,
                tool_use_id=as_str(params.get("callId")),
            )
        ]
    answer = rpc.error_response(request_id, f"Octipus does not handle the Codex request {method}")
    return [UnknownEvent(raw=obj, type=method), StdinWriteEvent(raw=None, lines=(answer,))]


# ------------------------------------------------------------------ exec JSONL
