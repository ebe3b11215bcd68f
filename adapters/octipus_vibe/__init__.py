"""Octipus adapter for Mistral Vibe (``vibe-acp`` / ``vibe``), registered as ``vibe``.

Pure: it builds the launch (argv, env, files, first stdin lines) and parses the output into
:mod:`octipusd.adapter` events; it never starts a process, opens a socket or reads a file.

Protocol facts come from ``/work/shared/protocols/observed.md`` §3 (what Mistral Vibe 3.0.2 did
on this machine) and ``sources.md`` §3, and from the pinned package's own source
(``vibe/acp/agent.py``, ``vibe/core/config``, the ``acp`` SDK). Everything the adapter relies on
was checked against the real 3.0.2 binaries, driven offline against the scripted Chat
Completions server (:mod:`octipusd.testing.chat_server`) and a real Octipus bridge on 127.0.0.1:

ACP (``vibe-acp``, the default transport):

* ``initialize`` and ``session/new`` (or ``session/load``) can be written together: the agent
  handles them in order. ``initialize`` answers after ~4 s (start-up), the session ~1-2 s later.
* The bridge given as ``{"type":"http","headers":[{"name":"Authorization",...}]}`` in
  ``mcpServers`` received the bearer token; its tools are reached by the model through
  ``run_typescript`` (``tools.mcp_octipus.<tool>({...})``) and show as tool calls titled
  ``mcp_octipus.<tool>``; in ``accept-edits`` mode each one raises ``session/request_permission``.
* A refused token gives the agent message ``The following MCP servers failed to connect:\\n-
  octipus: authentication was rejected`` after the session result and before the prompt's
  first update.
* ``session/request_permission`` carries only ``toolCall.toolCallId``; the tool's name
  (``_meta.tool_name``: ``bash``, ``mcp_octipus.update_work_plan``) and ``rawInput``
  (``{"command": ...}``) come with the ``tool_call`` update just before it. ``allow_once`` ran
  the command; ``reject_once`` gave ``failed`` / "Tool execution denied by approval callback".
* ``session/set_mode`` with ``ask`` / ``accept-edits`` / ``auto-approve`` answers ``{}``.
* ``session/load`` of a known id replays the history as ``session/update`` notifications before
  its result; the next prompt carries the full history. An unknown id gives JSON-RPC error
  ``-32602`` ``Session not found: <id>``. Usage figures are session totals, also across loads.
* Closing stdin after the prompt result ends ``vibe-acp`` (exit 0) within about a second.

Headless (``vibe --prompt-file F --output streaming``):

* Entries as in observed.md §3.3; no end marker, no usage; ``--output-dir`` export.json has the
  outcome, error, session id and usage; ``--prompt-file`` and ``--resume=<id>`` work; the session
  id stays the same across ``--resume``; ``--max-turns 1`` with a tool step stops with exit 3
  (``Stopped: turn_limit``, outcome ``turn_limit``); an unknown id exits 1 (outcome
  ``usage_error``, ``Session not found: <id>``).
* ``VIBE_MCP_SERVERS`` (JSON) with ``auth.api_key_env`` adds the bridge without a file; the bridge
  received the call under ``--agent auto-approve``. Under ``accept-edits`` / ``ask`` Vibe asks
  for every MCP tool and, with no callback in headless mode, denies it (``tool_denied``).
* Headless Vibe prints nothing about a failed MCP server (a refused token left no trace on
  stdout or stderr), so its bridge status stays ``unknown`` until a bridge call succeeds.

Public API: :class:`VibeAdapter`, :class:`VibeParser` and the helpers below.
"""

from __future__ import annotations

from octipusd.adapter_launch import BRIDGE_TOKEN_ENV

from .acp import (
    INITIALIZE_ID,
    PROMPT_ID,
    SESSION_PREFIX,
    SET_MODE_ID,
    SessionPlan,
    encode_cancel,
    encode_control_error,
    encode_permission_response,
)
from .acp_parser import AcpParser
from .adapter import VibeAdapter
from .headless import HEADER_TYPE, WRAPPER, HeadlessHeader, HeadlessParser
from .launch import (
    DEFAULT_TOKEN_LIMIT,
    DEFAULT_TRANSPORT,
    DEFAULT_TURN_LIMIT,
    MCP_SERVERS_ENV,
    MODEL_ENV,
    QUIET_ENV,
    TRANSPORTS,
    VIBE_MODES,
    check_additive_flags,
    compose_prompt,
    headless_mcp_servers,
)
from .parser import VibeParser
from .signals import (
    CHARS_PER_TOKEN,
    MCP_FAILED_PREFIX,
    SESSION_MISSING_TEXT,
    estimated_usage,
    mcp_statuses,
    parse_version,
    session_missing,
    vendor_tool_name,
)

__all__ = [
    "BRIDGE_TOKEN_ENV",
    "CHARS_PER_TOKEN",
    "DEFAULT_TOKEN_LIMIT",
    "DEFAULT_TRANSPORT",
    "DEFAULT_TURN_LIMIT",
    "HEADER_TYPE",
    "INITIALIZE_ID",
    "MCP_FAILED_PREFIX",
    "MCP_SERVERS_ENV",
    "MODEL_ENV",
    "PROMPT_ID",
    "QUIET_ENV",
    "SESSION_MISSING_TEXT",
    "SESSION_PREFIX",
    "SET_MODE_ID",
    "TRANSPORTS",
    "VIBE_MODES",
    "WRAPPER",
    "AcpParser",
    "HeadlessHeader",
    "HeadlessParser",
    "SessionPlan",
    "VibeAdapter",
    "VibeParser",
    "check_additive_flags",
    "compose_prompt",
    "encode_cancel",
    "encode_control_error",
    "encode_permission_response",
    "estimated_usage",
    "headless_mcp_servers",
    "mcp_statuses",
    "parse_version",
    "session_missing",
    "vendor_tool_name",
]
