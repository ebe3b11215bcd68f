"""Octipus adapter for the OpenAI Codex CLI (``codex``), registered as ``codex``.

Pure: it builds the launch (argv, env, first stdin lines) and parses Codex's output into
:mod:`octipusd.adapter` events; it never starts a process or opens a socket.

Two transports, chosen by the model row's ``metadata.cliAgent.transport``:

* ``app-server`` (default): ``codex app-server`` speaking JSON-RPC over stdio
  (observed-2.md §1). Command approvals, MCP tool approvals and permission requests arrive as
  server-to-client requests and are relayed to Octipus as
  :class:`~octipusd.adapter.PermissionRequestEvent`; usage is per turn.
* ``exec``: ``codex exec --json`` (observed.md §2), one process per turn, no approval relay.

Protocol facts come from ``/work/shared/protocols/observed.md`` §2, ``observed-2.md`` §1 and the
schema the pinned binary generates (``codex app-server generate-json-schema`` /
``generate-ts``). What this adapter relies on was checked against the real Codex CLI 0.171.0,
driven offline against :mod:`octipusd.testing.responses_server` and a real Octipus bridge on
127.0.0.1 inside a loopback-only network namespace:

* argv: ``codex app-server --disable plugins --disable remote_plugin -c analytics.enabled=false
  -c check_for_update_on_startup=false [--strict-config]`` is accepted (``--color`` is not: exec
  only); ``codex exec --json --skip-git-repo-check`` with the same flags, ``--sandbox=<mode>``,
  ``--model=<m>``, the ``-c mcp_servers.<name>.*`` values, ``resume <uuid>`` and ``-- <prompt>``.
* JSON-RPC sequence: ``initialize``, ``initialized`` and ``config/read`` can be pipelined (answered
  in order); ``thread/start`` (or ``thread/resume``) then ``turn/start``; the parser, made for the
  launch (``new_parser(request)``), sends the last two in answer to the first two responses. The
  bridge's ``mcpServer/startupStatus/updated`` (``starting`` then ``ready``) arrives around the
  thread response, before it on a resume. ``approvalsReviewer: "user"`` and, on resume,
  ``excludeTurns: true`` are accepted (without it a ``deprecationNotice`` is sent); developer
  instructions reach the model once, also after a resume (exec: ``-c developer_instructions``).
* Isolation: per-thread ``config.mcp_servers`` *adds* to the user's servers (nested and dotted
  forms, and ``-c mcp_servers={}`` on exec, all kept a ``[mcp_servers.lab]`` of config.toml);
  ``config/read`` lists them and ``{"<name>": {"enabled": false}}`` in the thread's config switches
  each off (names with dots too), so an app-server run sees only the Octipus bridge. exec cannot
  do this without reading config.toml: user-configured MCP servers stay loaded under exec.
* Approvals: ``item/commandExecution/requestApproval`` (untrusted policy: every command), with
  ``command`` ``/bin/bash -c '<cmd>'`` (``-lc`` where a login shell is allowed), ``cwd``, ``itemId``
  = the model's ``call_id``; answers
  ``{"decision":"accept"|"decline"}`` (decline: item ``declined``, turn continues);
  ``mcpServer/elicitation/request`` with ``_meta.codex_approval_kind == "mcp_tool_call"`` when the
  server has no ``default_tools_approval_mode`` (answers ``{"action":"accept"|"decline",...}``);
  ``serverRequest/resolved`` follows every answer. ``item/fileChange/requestApproval``,
  ``item/permissions/requestApproval`` and the v1 requests are handled from the schema only (the
  scripted model cannot make Codex offer ``apply_patch`` for an unknown model).
* ``required = true`` bridge that cannot start: ``thread/start`` fails with ``required MCP servers
  failed to initialize: <name>: ...`` (wrong token, token variable unset), exec exits 1.
* Usage: ``thread/tokenUsage/updated`` per model request with ``last`` and ``total``; a resumed
  thread replays the previous turn's notification (old ``turnId``) before the new turn starts.
* Resume: ``thread/resume`` of an unknown UUID -> error ``no rollout found for thread id <id>``;
  of a non-UUID -> ``invalid session id: ...``; the history is sent again in full. exec: unknown
  UUID -> rc 1, empty stdout, the same text on stderr; ``turn.completed.usage`` cumulative.
* Policy: under ``untrusted`` an approved command runs even in the ``read-only`` sandbox.

Public API: :class:`CodexAdapter`, :class:`CodexStreamParser` and the helpers below.
"""

from __future__ import annotations

from octipusd.adapter_launch import BRIDGE_TOKEN_ENV

from .adapter import CodexAdapter
from .control import (
    INVALID_SESSION_TEXT,
    SESSION_MISSING_TEXT,
    mcp_failure,
    parse_version,
    session_missing,
    stderr_session_missing,
    usage_is_cumulative,
)
from .items import command_input
from .launch import (
    ALLOWED_ADDITIVE_FLAGS,
    APPROVAL_POLICIES,
    QUIET_FLAGS,
    SANDBOX_MODES,
    TRANSPORT_APP_SERVER,
    TRANSPORT_EXEC,
    TRANSPORTS,
    normalize_additive_flags,
    toml_string,
)
from .parser import CodexStreamParser
from .rpc import encode_control_error, encode_permission_response, unwrap_shell

__all__ = [
    "ALLOWED_ADDITIVE_FLAGS",
    "APPROVAL_POLICIES",
    "BRIDGE_TOKEN_ENV",
    "INVALID_SESSION_TEXT",
    "QUIET_FLAGS",
    "SANDBOX_MODES",
    "SESSION_MISSING_TEXT",
    "TRANSPORTS",
    "TRANSPORT_APP_SERVER",
    "TRANSPORT_EXEC",
    "CodexAdapter",
    "CodexStreamParser",
    "command_input",
    "encode_control_error",
    "encode_permission_response",
    "mcp_failure",
    "normalize_additive_flags",
    "parse_version",
    "session_missing",
    "stderr_session_missing",
    "toml_string",
    "unwrap_shell",
    "usage_is_cumulative",
]
