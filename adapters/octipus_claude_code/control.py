"""Claude Code's stdin control messages and the signals Octipus reads from its events.

Encoders return one stdin line without its newline (compact, ASCII-only JSON). Shapes are the
stdio control protocol of ``--permission-prompt-tool stdio`` (observed.md §1.4, §1.6(b);
sources.md §1.6).
"""

from __future__ import annotations

import json
import re
from typing import Final

from octipusd.adapter import (
    JSON,
    CapabilityRow,
    PermissionDecision,
    PermissionRequestEvent,
    ResultEvent,
    SessionEvent,
)
from octipusd.adapterkit import bridge_not_connected

#: Text of Claude's error for an unknown or out-of-cwd resume id (observed.md §1.7, sources.md §1.2).
SESSION_MISSING_TEXT: Final = "No conversation found with session ID"

#: Seed 003's "Permissions and limits" row of the Claude-based adapters (Claude Code, GLM, Kimi).
CAPABILITIES: Final = CapabilityRow(
    adapter="Claude Code / GLM / Kimi",
    octipus_tools="Scoped MCP",
    vendor_planning_mode="plan",
    activity="Structured stream",
    vendor_approval_relay="Claude permission control requests enter Octipus approvals",
)

#: Reason sent with a denial when the decision carries none.
DEFAULT_DENY_MESSAGE: Final = "denied by Octipus policy"

_VERSION_RE: Final = re.compile(r"\b(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)")


def _line(obj: JSON) -> str:
    return json.dumps(obj, separators=(",", ":"))


def encode_permission_response(request: PermissionRequestEvent, decision: PermissionDecision) -> str:
    """Encode the answer to a ``can_use_tool`` control request.

    Allow::

        {"type":"control_response","response":{"subtype":"success","request_id":<id>,
         "response":{"behavior":"allow","updatedInput":<input>,"toolUseID":<tool_use_id>}}}

    ``updatedInput`` is mandatory: a bare allow fails Claude's validation and the tool does not
    run (observed.md §1.6). It is ``decision.updated_input`` when given, else the request's own
    input. ``toolUseID`` echoes the request's tool-use id when it has one (FACTS.md §3 "CLI relay";
    accepted by 2.1.197, checked with a real run: the tool ran).

    Deny::

        {"type":"control_response","response":{"subtype":"success","request_id":<id>,
         "response":{"behavior":"deny","message":<message>}}}

    Claude shows ``message`` to the model as the tool result (``is_error: true``) and lists the
    call in ``result.permission_denials`` (observed.md §1.6). An empty message becomes
    :data:`DEFAULT_DENY_MESSAGE`.

    Args:
        request: The parsed permission request.
        decision: Octipus's decision.

    Returns:
        The stdin line, without newline.
    """
    response: JSON
    if decision.allow:
        updated = decision.updated_input if decision.updated_input is not None else request.input
        response = {"behavior": "allow", "updatedInput": updated}
        if request.tool_use_id:
            response["toolUseID"] = request.tool_use_id
    else:
        response = {"behavior": "deny", "message": decision.message or DEFAULT_DENY_MESSAGE}
    return _line(
        {
            "type": "control_response",
            "response": {"subtype": "success", "request_id": request.request_id, "response": response},
        }
    )


def encode_control_error(request_id: str, message: str) -> str:
    """Encode an error answer to a control request Octipus does not support.

    Shape (sources.md §1.6)::

        {"type":"control_response","response":{"subtype":"error","request_id":<id>,"error":<message>}}

    Args:
        request_id: The request's ``request_id``.
        message: Why it is refused (shown in Claude's logs; keep secrets out).

    Returns:
        The stdin line, without newline.
    """
    response = {"subtype": "error", "request_id": request_id, "error": message}
    return _line({"type": "control_response", "response": response})


def encode_interrupt(request_id: str) -> str:
    """Encode an ``interrupt`` control request (ends the current turn cleanly).

    Shape (observed.md §1.4)::

        {"type":"control_request","request_id":<id>,"request":{"subtype":"interrupt"}}

    Claude answers with a ``control_response`` success, a user line
    ``[Request interrupted by user]`` and a ``result`` with subtype ``error_during_execution``;
    the session stays usable.

    Args:
        request_id: A fresh id chosen by the caller.

    Returns:
        The stdin line, without newline.
    """
    return _line({"type": "control_request", "request_id": request_id, "request": {"subtype": "interrupt"}})


def mcp_failure(event: SessionEvent, server_name: str) -> str | None:
    """Tell whether ``system/init`` reports Octipus's bridge as anything but ``connected``.

    Claude does not fail when an MCP server cannot connect: the run goes on without its tools and
    exits 0 (observed.md §1.5). ``system/init`` is printed once Claude stopped waiting for its MCP
    servers (about 2.5 s on 2.1.197): a bridge that refused the token shows ``failed``, one that
    accepted the connection but never answered shows ``pending`` and its tools are then missing
    ("still connecting"), and a configured bridge absent from ``mcp_servers`` (with
    ``--strict-mcp-config`` every configured server is listed) was not loaded. Each makes the run
    useless, so the parser fails it (:class:`~octipusd.adapter.RunFailureEvent`) with this reason.

    Args:
        event: A parsed ``system/init``.
        server_name: The bridge's MCP server name (``BridgeEndpoint.server_name``).

    Returns:
        A one-sentence reason for a person, or None when the bridge is connected.
    """
    failure = bridge_not_connected(event, server_name, "Claude Code", "system/init")
    return failure.reason if failure is not None else None


def session_missing(result: ResultEvent) -> bool:
    """Whether a result says the resumed Claude conversation does not exist.

    Claude answers an unknown id, or an id resumed from another working directory, with exit
    code 1 and a single ``result`` line (``error_during_execution``) whose ``errors`` hold
    ``No conversation found with session ID: <id>`` (observed.md §1.7). The runtime then starts
    cold with a fresh id.

    Args:
        result: The parsed result.

    Returns:
        True when that message appears in ``errors`` or in the result text.
    """
    texts = [*result.errors, result.text or ""]
    return any(SESSION_MISSING_TEXT in t for t in texts)


def parse_version(output: str) -> str | None:
    """Read the version out of ``claude --version`` output.

    Args:
        output: The command's stdout, e.g. ``"2.1.197 (Claude Code)\\n"`` (observed on the pinned
            binary).

    Returns:
        The first ``MAJOR.MINOR.PATCH[-pre]`` found (``"2.1.197"``), or None.
    """
    match = _VERSION_RE.search(output)
    return match.group(1) if match else None
