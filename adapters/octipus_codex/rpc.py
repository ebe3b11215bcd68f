"""Codex ``app-server`` JSON-RPC messages: the client's requests and its answers to server requests.

One JSON object per line, without the ``"jsonrpc"`` member (the server omits it and accepts
requests without it, observed-2.md §1.1). Method names and shapes come from the schema the
pinned binary generates (``codex app-server generate-json-schema``, observed-2.md §1.1) and were
exercised against Codex CLI 0.171.0 (see the package docstring for what was verified).

A run's requests follow a :class:`Plan` built from the launch request
(:func:`octipus_codex.launch.app_server_plan`): the launch writes ``initialize``, ``initialized``
and ``config/read``; the parser (which gets the same request, ``Adapter.new_parser(request)``)
answers the ``config/read`` response with the thread request and the thread response with
``turn/start``. Octipus's request ids are fixed strings, so a response is matched by its id.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from octipusd.adapter import JSON, PermissionDecision, PermissionRequestEvent

#: Id of the ``initialize`` request.
INITIALIZE_ID: Final = "octipus/initialize"
#: Id of the ``config/read`` request.
CONFIG_READ_ID: Final = "octipus/config/read"
#: Id of the ``thread/start`` / ``thread/resume`` request.
THREAD_ID: Final = "octipus/thread"
#: Id of the ``turn/start`` request.
TURN_START_ID: Final = "octipus/turn/start"

#: JSON-RPC error code sent for a server request Octipus does not handle ("Method not found").
METHOD_NOT_FOUND: Final = -32601

#: Reason sent (where the protocol has room for one) with a denial that carries none.
DEFAULT_DENY_MESSAGE: Final = "denied by Octipus policy"

#: Client name sent in ``initialize.clientInfo`` (it becomes the ``originator`` header and the
#: User-Agent prefix of model requests, observed-2.md §1.2).
CLIENT_NAME: Final = "octipus"

#: Shells whose ``<shell> -lc <script>`` wrapper is removed from a command for Octipus rules.
_SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash"})


def dumps(obj: object) -> str:
    """Encode one JSON-RPC line: compact, ASCII-only JSON (no newline)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True)


@dataclass(frozen=True)
class Plan:
    """The requests of one app-server run.

    Attributes:
        thread_method: ``thread/start`` or ``thread/resume``.
        thread_params: Its params (``cwd``, ``approvalPolicy``, ``approvalsReviewer``, ``sandbox``,
            ``config`` with the bridge, ``model``, ``developerInstructions``; ``threadId`` and
            ``excludeTurns`` on a resume).
        turn_params: ``turn/start`` params without ``threadId`` (the prompt as ``input``).
        bridge: MCP server name of the Octipus bridge, or None when the run has none.
        resume: The thread id requested to resume, or None for a new thread.
    """

    thread_method: str
    thread_params: JSON = field(hash=False)
    turn_params: JSON = field(hash=False)
    bridge: str | None = None
    resume: str | None = None


def request(request_id: str, method: str, params: Mapping[str, Any]) -> str:
    """Encode a client request line ``{"id", "method", "params"}``."""
    return dumps({"id": request_id, "method": method, "params": dict(params)})


def notification(method: str) -> str:
    """Encode a client notification line without params (``{"method": ...}``)."""
    return dumps({"method": method})


def initialize_request(version: str) -> str:
    """Encode ``initialize`` (observed-2.md §1.2).

    Shape::

        {"id":"octipus/initialize","method":"initialize",
         "params":{"clientInfo":{"name":"octipus","title":"Octipus","version":<version>},
                   "capabilities":{"experimentalApi":false}}}

    Args:
        version: Octipus's version, sent as ``clientInfo.version``.

    Returns:
        The line.
    """
    return request(
        INITIALIZE_ID,
        "initialize",
        {
            "clientInfo": {"name": CLIENT_NAME, "title": "Octipus", "version": version},
            "capabilities": {"experimentalApi": False},
        },
    )


def thread_request(plan: Plan, disabled_servers: tuple[str, ...] = ()) -> str:
    """Encode the plan's ``thread/start`` / ``thread/resume`` request (id :data:`THREAD_ID`).

    Args:
        plan: The run's plan.
        disabled_servers: MCP servers of the user's configuration (``config/read``) to switch off for
            this thread (``mcp_servers.<name>.enabled = false``), so that only the Octipus bridge is
            loaded (seed 003 "How tools and context work": the CLI's MCP list is isolated per run).

    Returns:
        The line.
    """
    params = dict(plan.thread_params)
    if disabled_servers:
        config = dict(params.get("config") or {})
        servers = dict(config.get("mcp_servers") or {})
        for name in disabled_servers:
            if name != plan.bridge:
                servers[name] = {"enabled": False}
        config["mcp_servers"] = servers
        params["config"] = config
    return request(THREAD_ID, plan.thread_method, params)


def turn_request(plan: Plan, thread_id: str) -> str:
    """Encode ``turn/start`` for ``thread_id`` with the plan's turn params (observed-2.md §1.2)."""
    return request(TURN_START_ID, "turn/start", {"threadId": thread_id, **plan.turn_params})


def request_id_text(request_id: object) -> str:
    """The text form of a JSON-RPC id used as :attr:`PermissionRequestEvent.request_id`.

    It is the id's compact JSON (``0`` -> ``"0"``, ``"a"`` -> ``'"a"'``), so that an integer id
    and a string id never collide and :func:`request_id_value` restores the exact id.
    """
    try:
        return json.dumps(request_id, separators=(",", ":"))
    except (TypeError, ValueError):
        return json.dumps(str(request_id))


def request_id_value(text: str) -> Any:
    """Inverse of :func:`request_id_text`; text that is not JSON is used as a string id."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    return value if isinstance(value, str | int) and not isinstance(value, bool) else text


def response(request_id: object, result: Mapping[str, Any]) -> str:
    """Encode a response to a server request: ``{"id": <id>, "result": <result>}``."""
    return dumps({"id": request_id, "result": dict(result)})


def error_response(request_id: object, message: str, code: int = METHOD_NOT_FOUND) -> str:
    """Encode an error response to a server request: ``{"id", "error": {"code", "message"}}``."""
    return dumps({"id": request_id, "error": {"code": code, "message": message}})


def unwrap_shell(command: str) -> str:
    """Return the script of a ``<shell> -lc <script>`` command, else the command unchanged.

    Codex runs a model's ``exec_command`` as ``/bin/bash -lc '<cmd>'`` and shows that in items and
    approval requests (observed-2.md §1.3). Octipus rules match the command the model asked for
    (``cli-native:commandExecution(git:*)``), so the wrapper is removed: argv of exactly three words
    whose first is bash/sh/zsh/dash (any directory) and whose second is ``-c`` or ``-lc``.

    Args:
        command: The command text as Codex reports it.

    Returns:
        The inner script, or ``command`` when it is not such a wrapper or cannot be split.
    """
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if len(words) == 3 and words[0].rsplit("/", 1)[-1] in _SHELLS and words[1] in ("-c", "-lc"):
        return words[2]
    return command


def _plain_decision(method: str, allow: bool, message: str) -> JSON:
    if method in ("execCommandApproval", "applyPatchApproval"):
        # v1 ReviewDecision (schema ReviewDecision.ts)
        return {"decision": "approved" if allow else {"denied": {"rejection": message}}}
    # v2 CommandExecutionApprovalDecision / FileChangeApprovalDecision
    return {"decision": "accept" if allow else "decline"}


def encode_permission_response(request: PermissionRequestEvent, decision: PermissionDecision) -> str:
    """Encode the JSON-RPC response to a relayed approval request.

    The method is read from ``request.raw`` (the server request as received); the id is the raw
    id, or :func:`request_id_value` of ``request.request_id`` when ``raw`` is missing.

    ==========================================  ==================================  =============================
    server request                              allow                               deny
    ==========================================  ==================================  =============================
    ``item/commandExecution/requestApproval``   ``{"decision":"accept"}``           ``{"decision":"decline"}``
    ``item/fileChange/requestApproval``         ``{"decision":"accept"}``           ``{"decision":"decline"}``
    ``mcpServer/elicitation/request``           ``{"action":"accept","content":{},  ``{"action":"decline",
                                                "_meta":null}``                     "content":null,"_meta":null}``
    ``item/permissions/requestApproval``        ``{"permissions":<requested>,       ``{"permissions":{},
                                                "scope":"turn"}``                   "scope":"turn"}``
    ``execCommandApproval`` (v1)                ``{"decision":"approved"}``         ``{"decision":{"denied":
    ``applyPatchApproval`` (v1)                                                     {"rejection":<message>}}}``
    ==========================================  ==================================  =============================

    Observed on 0.171.0 (observed-2.md §1.3-§1.4, re-checked for this adapter): ``accept`` runs the
    command; ``decline`` marks the item ``declined``, the model receives
    ``exec_command failed: ... rejected by user`` and **the turn goes on** (``cancel`` would end the
    turn, so a denial is always ``decline``); an elicitation ``accept`` runs the MCP tool and
    ``decline`` fails the item with ``user rejected MCP tool call``. Codex cannot run an edited
    command, so ``decision.updated_input`` is ignored; a denial's message reaches the model only
    for the v1 requests.

    Args:
        request: The parsed permission request.
        decision: Octipus's decision.

    Returns:
        The stdin line, without newline.
    """
    raw = request.raw if isinstance(request.raw, dict) else {}
    request_id = raw.get("id", request_id_value(request.request_id))
    method = raw.get("method")
    message = decision.message or DEFAULT_DENY_MESSAGE
    result: JSON
    if method == "mcpServer/elicitation/request":
        result = (
            {"action": "accept", "content": {}, "_meta": None}
            if decision.allow
            else {"action": "decline", "content": None, "_meta": None}
        )
    elif method == "item/permissions/requestApproval":
        params = raw.get("params")
        requested = params.get("permissions") if isinstance(params, dict) else None
        granted = {k: v for k, v in requested.items() if v is not None} if isinstance(requested, dict) else {}
        result = {"permissions": granted if decision.allow else {}, "scope": "turn"}
    else:
        result = _plain_decision(str(method), decision.allow, message)
    return response(request_id, result)


def encode_control_error(request_id: str, message: str) -> str:
    """Encode a JSON-RPC error answering a server request Octipus does not handle.

    Shape: ``{"id": <id>, "error": {"code": -32601, "message": <message>}}``; ``request_id`` is
    :attr:`PermissionRequestEvent.request_id`-style text (:func:`request_id_text`), or a plain
    string id.

    Args:
        request_id: The request's id as text.
        message: Why it is refused (keep secrets out).

    Returns:
        The stdin line, without newline.
    """
    return error_response(request_id_value(request_id), message)
