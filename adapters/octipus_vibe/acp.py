"""Vibe's Agent Client Protocol (``vibe-acp``): the client's messages (the parser of the agent's
output is :mod:`octipus_vibe.acp_parser`).

JSON-RPC 2.0, one object per line on stdio (observed.md §3.5). One run is one conversation of
Octipus (the client) with ``vibe-acp`` (the agent):

=================================================  =============================================
client -> agent (stdin)                            agent -> client (stdout)
=================================================  =============================================
``initialize`` (``initial_input`` line 1)          result: protocol 1, ``loadSession: true``
``session/new`` or ``session/load`` (line 2)       (load: the history replayed as
                                                   ``session/update``) result: ``sessionId``,
                                                   ``modes`` (currentModeId, availableModes)
``session/set_mode`` (only when the mode differs)  result ``{}``
``session/prompt``                                 ``session/update`` notifications, then result
                                                   ``{stopReason, usage}``
answer to ``session/request_permission``           (requests while the prompt runs)
``session/cancel`` (notification; turn/token cap)  the prompt result with ``stopReason: cancelled``
=================================================  =============================================

Requests are pipelined only where the agent serialises them: ``vibe-acp`` (the ``acp`` SDK)
starts one task per request in arrival order, and ``initialize`` completes without yielding, so
``session/new`` written right behind it sees the client capabilities (checked on 3.0.2: the
session answers normally, and an unknown ``session/load`` id gives its usual error). Everything
later waits for the previous response.

**Where the parser's plan comes from.** ``Adapter.new_parser()`` takes no argument, yet the
parser must send ``session/set_mode`` and ``session/prompt`` with values from the launch request
(prompt, mode, limits). A JSON-RPC response echoes its request's ``id`` verbatim, so the adapter
puts the plan in the id of the ``session/new`` / ``session/load`` request
(``octipus/session:<json>``, see :class:`SessionPlan`) and the parser decodes it from the
response. The plan holds no secret: the bridge token travels only inside the ``session/new``
request's ``mcpServers`` on stdin and is never echoed. (The Codex adapter carries its plan the
same way.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from octipusd.adapter import JSON, PermissionDecision, PermissionRequestEvent

from ._coerce import as_dict, as_int, as_list, as_str

#: ACP protocol version sent in ``initialize`` (``vibe-acp`` 3.0.2 answers 1).
PROTOCOL_VERSION: Final = 1
#: Id of the ``initialize`` request.
INITIALIZE_ID: Final = "octipus/initialize"
#: Prefix of the ``session/new`` / ``session/load`` request id; the JSON plan follows.
SESSION_PREFIX: Final = "octipus/session:"
#: What events show as the session response's id (the plan it carries repeats the prompt).
SESSION_ID_SHOWN: Final = "octipus/session"
#: Id of the ``session/set_mode`` request.
SET_MODE_ID: Final = "octipus/set_mode"
#: Id of the ``session/prompt`` request.
PROMPT_ID: Final = "octipus/prompt"

#: JSON-RPC error code for an agent request Octipus does not serve ("Method not found").
METHOD_NOT_FOUND: Final = -32601


_CANONICAL_INT: Final = re.compile(r"^-?(?:0|[1-9][0-9]{0,17})$")


def dumps(obj: object) -> str:
    """Encode one JSON-RPC line.

    Args:
        obj: A JSON-encodable message.

    Returns:
        Compact, ASCII-only JSON without a trailing newline (one stdin line).
    """
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True)


def request_id_text(value: object) -> str:
    """The text form of a JSON-RPC id used as ``PermissionRequestEvent.request_id``.

    Args:
        value: The ``id`` of an agent request (Vibe numbers its own requests 0, 1, 2...).

    Returns:
        Numbers as decimal text, strings unchanged, anything else as JSON text. :func:`wire_id`
        reverses it.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return str(value)


def wire_id(request_id: str) -> int | str:
    """The JSON-RPC id to echo for a ``request_id`` text.

    The agent matches responses to its pending requests by id *and type* (the ``acp`` SDK keys
    them by the int it sent), so ``"0"`` must go back as ``0``.

    Args:
        request_id: Text from :func:`request_id_text`.

    Returns:
        An int when the text is a canonical integer (``0``, ``-3``, ``17``), else the text.
    """
    if _CANONICAL_INT.match(request_id):
        return int(request_id)
    return request_id


def encode_request(request_id: str, method: str, params: JSON) -> str:
    """Encode a client request line ``{"jsonrpc":"2.0","id":..,"method":..,"params":..}``.

    Args:
        request_id: The request id (Octipus uses strings: :data:`INITIALIZE_ID`, ...).
        method: The ACP method, e.g. ``session/prompt``.
        params: Its params object.

    Returns:
        The stdin line, without newline.
    """
    return dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def encode_notification(method: str, params: JSON) -> str:
    """Encode a client notification line (no id).

    Args:
        method: The ACP method, e.g. ``session/cancel``.
        params: Its params object.

    Returns:
        The stdin line, without newline.
    """
    return dumps({"jsonrpc": "2.0", "method": method, "params": params})


def encode_cancel(session_id: str) -> str:
    """Encode ``session/cancel`` (ACP notification; Vibe then ends the prompt with ``cancelled``).

    Args:
        session_id: The Vibe session whose prompt to cancel.

    Returns:
        The stdin line ``{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":..}}``.
    """
    return encode_notification("session/cancel", {"sessionId": session_id})


def encode_permission_response(request: PermissionRequestEvent, decision: PermissionDecision) -> str:
    """Encode the answer to a ``session/request_permission`` request.

    Shape (observed.md §3.5, checked on 3.0.2)::

        {"jsonrpc":"2.0","id":<the request's id>,
         "result":{"outcome":{"outcome":"selected","optionId":"allow_once"|"reject_once"}}}

    The option id is the one the request offered with kind ``allow_once`` (allow) or
    ``reject_once`` (deny), which Vibe 3.0.2 names ``allow_once`` and ``reject_once``. Only
    one-time options are ever chosen: every later call asks again. ACP has no room for a reason or
    an edited input: on a denial Vibe tells the model "User rejected the tool call; provide an
    alternative plan" and reports the tool call ``failed`` ("Tool execution denied by approval
    callback"); ``decision.message`` and ``decision.updated_input`` are not transmitted.

    Args:
        request: The parsed permission request (its ``raw`` carries the JSON-RPC id and options).
        decision: Octipus's decision.

    Returns:
        The stdin line, without newline.
    """
    raw = as_dict(request.raw)
    request_id: object = raw["id"] if "id" in raw else wire_id(request.request_id)
    wanted = "allow_once" if decision.allow else "reject_once"
    option_id = wanted
    for option in as_list(as_dict(raw.get("params")).get("options")):
        entry = as_dict(option)
        if entry.get("kind") == wanted and isinstance(entry.get("optionId"), str):
            option_id = entry["optionId"]
            break
    return dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"outcome": {"outcome": "selected", "optionId": option_id}},
        }
    )


def encode_control_error(request_id: str, message: str) -> str:
    """Encode a JSON-RPC error answering an agent request Octipus does not serve.

    Shape::

        {"jsonrpc":"2.0","id":<id>,"error":{"code":-32601,"message":<message>}}

    Octipus declares no client capabilities (``fs`` and ``terminal`` off, no elicitation), so
    Vibe should send none besides ``session/request_permission``; any other request
    (``fs/read_text_file``, ``terminal/create``...) is refused this way and the parser writes the
    answer itself.

    Args:
        request_id: The request's id in text form (:func:`request_id_text`).
        message: Why it is refused (keep secrets out).

    Returns:
        The stdin line, without newline.
    """
    return dumps(
        {"jsonrpc": "2.0", "id": wire_id(request_id), "error": {"code": METHOD_NOT_FOUND, "message": message}}
    )


@dataclass(frozen=True)
class SessionPlan:
    """What the parser does once the session exists, carried in the session request's id.

    Attributes:
        prompt: ``session/prompt`` content blocks (``[{"type": "text", "text": ...}]``).
        mode: The ACP mode to run in (``ask``, ``accept-edits``, ``auto-approve``).
        bridge: MCP server name of the Octipus bridge, or None for a run without one.
        resume: The session id being loaded, or None for a new session.
        turn_limit: Model steps after which the parser cancels the prompt, or None.
        token_limit: Run tokens (input + output + cache reads) after which it cancels, or None.
    """

    prompt: list[JSON] = field(hash=False)
    mode: str | None = None
    bridge: str | None = None
    resume: str | None = None
    turn_limit: int | None = None
    token_limit: int | None = None

    def to_id(self) -> str:
        """Encode the plan as a request id: :data:`SESSION_PREFIX` + compact JSON."""
        body = {
            "v": 1,
            "prompt": self.prompt,
            "mode": self.mode,
            "bridge": self.bridge,
            "resume": self.resume,
            "turnLimit": self.turn_limit,
            "tokenLimit": self.token_limit,
        }
        return SESSION_PREFIX + json.dumps(body, separators=(",", ":"), ensure_ascii=True)

    @classmethod
    def from_id(cls, value: object) -> SessionPlan | None:
        """Decode a plan from a response id; None when it is not one of :meth:`to_id`'s ids."""
        if not isinstance(value, str) or not value.startswith(SESSION_PREFIX):
            return None
        try:
            body: Any = json.loads(value[len(SESSION_PREFIX) :])
        except (ValueError, RecursionError):
            return None
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), list):
            return None
        prompt = [block for block in body["prompt"] if isinstance(block, dict)]
        limits = {key: as_int(body.get(key)) for key in ("turnLimit", "tokenLimit")}
        return cls(
            prompt=prompt,
            mode=as_str(body.get("mode")),
            bridge=as_str(body.get("bridge")),
            resume=as_str(body.get("resume")),
            turn_limit=limits["turnLimit"],
            token_limit=limits["tokenLimit"],
        )


def prompt_blocks(text: str) -> list[JSON]:
    """The ``session/prompt`` content for ``text``.

    Args:
        text: The prompt (with Octipus's instructions at its head, if any).

    Returns:
        ``[{"type": "text", "text": text}]`` (one ACP text block).
    """
    return [{"type": "text", "text": text}]


def initialize_params(client_version: str) -> JSON:
    """``initialize`` params: protocol 1, no client capabilities (observed.md §3.5).

    ``fs`` and ``terminal`` are off so Vibe runs its own file and shell tools (and relays their
    permission requests) instead of asking the client to read files or run commands.

    Args:
        client_version: Octipus's version, sent in ``clientInfo``.

    Returns:
        ``{"protocolVersion": 1, "clientCapabilities": {...}, "clientInfo": {...}}``.
    """
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
        "clientInfo": {"name": "octipus", "title": "Octipus", "version": client_version},
    }


def mcp_server_entry(name: str, url: str, token: str) -> JSON:
    """The ACP ``mcpServers`` entry of the bridge (``type: http`` with the bearer header).

    Vibe maps it to a ``streamable-http`` server with the header (``_project_acp_mcp_servers``);
    on 3.0.2 the bridge received ``Authorization: Bearer <token>`` on ``initialize``.

    Args:
        name: The MCP server name (Vibe's connector group becomes ``mcp_<name>``).
        url: The bridge URL.
        token: The run's capability (a secret: the entry only ever goes to stdin).

    Returns:
        ``{"type": "http", "name", "url", "headers": [{"name": "Authorization", "value": ...}]}``.
    """
    return {
        "type": "http",
        "name": name,
        "url": url,
        "headers": [{"name": "Authorization", "value": f"Bearer {token}"}],
    }


def session_request(
    *,
    plan: SessionPlan,
    cwd: str,
    mcp_servers: Sequence[JSON],
) -> str:
    """Encode the ``session/new`` (or, with ``plan.resume``, ``session/load``) request line.

    ``session/load`` re-sends ``mcpServers``: a loaded session gets no MCP configuration of its
    own (observed.md §3.5).

    Args:
        plan: The session plan; its id form becomes the request id.
        cwd: The run's working directory.
        mcp_servers: ``mcpServers`` entries (:func:`mcp_server_entry`).

    Returns:
        The stdin line, without newline.
    """
    params: JSON = {"cwd": cwd, "mcpServers": list(mcp_servers)}
    if plan.resume:
        params = {"sessionId": plan.resume, **params}
        return encode_request(plan.to_id(), "session/load", params)
    return encode_request(plan.to_id(), "session/new", params)
