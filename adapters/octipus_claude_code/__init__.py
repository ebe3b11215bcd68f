"""Octipus adapter for Claude Code (``claude``), registered as ``claude-code``.

Pure: it builds the launch (argv, env, files, first stdin line) and parses the stream-json
stdout into :mod:`octipusd.adapter` events; it never starts a process or opens a socket.

Protocol facts come from ``/work/shared/protocols/observed.md`` §1 (what Claude Code 2.1.197 did
on this machine) and ``sources.md`` §1 (docs and the official SDK). The argv built here was
checked against the real 2.1.197 binary, driven offline against a scripted Anthropic server on
127.0.0.1:

* ``--flag=value`` binds for every value flag used: ``--session-id=`` (init, result and the
  ``X-Claude-Code-Session-Id`` header carry the id; a non-UUID gives "Invalid session ID"),
  ``--resume=`` (same id, the model receives the history; a non-UUID gives the §1.7 error),
  ``--mcp-config=<file>`` (the server is listed in ``system/init.mcp_servers`` and receives
  ``Authorization: Bearer <token>`` on ``initialize``), ``--permission-mode=`` (init reports
  acceptEdits / bypassPermissions / plan / default; a bad value is a parse error naming the
  choices), ``--model=`` (init and request ``model``), ``--append-system-prompt=`` (the text,
  even one containing `` --not-a-flag``, reaches the request's ``system``),
  ``--append-system-prompt-file=`` (hidden flag; a 200 KB file reached ``system``),
  ``--effort=`` (``output_config.effort`` in the request; an unknown value is only warned about),
  and the switches ``--no-session-persistence``, ``--no-chrome``, ``--disable-slash-commands``,
  ``--strict-mcp-config``.
* ``bypassPermissions`` as root exits 1 (``--dangerously-skip-permissions cannot be used with
  root/sudo privileges``) unless ``IS_SANDBOX=1``.
* A stdio allow carrying ``toolUseID`` besides ``updatedInput`` is accepted (the tool ran).

Public API: :class:`ClaudeCodeAdapter`, :class:`ClaudeStreamParser`, and the helpers below.
"""

from __future__ import annotations

from .adapter import ClaudeCodeAdapter
from .control import (
    SESSION_MISSING_TEXT,
    encode_control_error,
    encode_interrupt,
    encode_permission_response,
    mcp_failure,
    parse_version,
    session_missing,
)
from .launch import (
    ADDITIVE_SWITCHES,
    ALLOWED_ADDITIVE_FLAGS,
    BASE_FLAGS,
    EFFORT_LEVELS,
    PERMISSION_MODES,
    QUIET_ENV,
    encode_user_message,
    mcp_config_json,
    normalize_additive_flags,
)
from .parser import ClaudeStreamParser, flatten_tool_result

__all__ = [
    "ADDITIVE_SWITCHES",
    "ALLOWED_ADDITIVE_FLAGS",
    "BASE_FLAGS",
    "EFFORT_LEVELS",
    "PERMISSION_MODES",
    "QUIET_ENV",
    "SESSION_MISSING_TEXT",
    "ClaudeCodeAdapter",
    "ClaudeStreamParser",
    "encode_control_error",
    "encode_interrupt",
    "encode_permission_response",
    "encode_user_message",
    "flatten_tool_result",
    "mcp_config_json",
    "mcp_failure",
    "normalize_additive_flags",
    "parse_version",
    "session_missing",
]
