"""The Claude Code adapter object (registered as ``claude-code`` in ``octipus.adapters``)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from octipusd.adapter import (
    AdapterDefaults,
    CapabilityRow,
    LaunchRequest,
    LaunchSpec,
    PermissionDecision,
    PermissionRequestEvent,
    ResultEvent,
    SessionEvent,
    VendorEvent,
)
from octipusd.adapterkit import shell_guard_command

from . import control, launch
from .launch import normalize_additive_flags
from .parser import ClaudeStreamParser


def _effective_uid_is_root() -> bool:
    geteuid = getattr(os, "geteuid", None)
    return geteuid is not None and geteuid() == 0


class ClaudeCodeAdapter(AdapterDefaults):
    """Claude Code (``claude`` 2.x in headless stream-json mode). Pure: no process, socket or database.

    Implements :class:`octipusd.adapter.Adapter`; see :mod:`octipus_claude_code` for what each
    protocol fact rests on.

    Args:
        running_as_root: Whether the vendor process will run with effective uid 0, which decides
            whether ``full`` mode needs ``IS_SANDBOX=1`` (observed.md §1.9). None (the default, what
            the entry point uses) reads the daemon's own effective uid, since the runner spawns the
            vendor as the daemon's user.
        shell_guard: The shell command of the space-mode guard hook. None (the default) runs
            ``octipus-bridge shell-guard`` from the daemon's ``bin`` folder, by absolute path so it
            works inside the vendor process whatever its ``PATH``
            (:func:`octipusd.adapterkit.shell_guard_command`).

    Attributes:
        name: ``claude-code``.
        display_name: ``Claude Code``.
        setting_key: ``claudeCode`` (the ``cliModels.claudeCode`` binary setting).
        binary_env: ``OCTIPUS_CLAUDE_BINARY`` (its first-boot variable).
        default_binary: ``claude``.
        supports_resume: True: Octipus mints the id (``--session-id``) and resumes it (``--resume``).
        config_env: :data:`octipus_claude_code.launch.CONFIG_ENV`.
        api_key_env: :data:`octipus_claude_code.launch.API_KEY_ENV`.
        space_mode: The declared space mode (seed 003 "In shared spaces"; read by
            ``octipusd.policy.spaces.check_space_model``): permission mode default (plan stays plan)
            with the stdio relay, no settings files but a locked ``--settings`` file whose only hook
            is the shell guard.
        shell_guard_command: The guard hook command used in space mode.
    """

    name: str = "claude-code"
    display_name: str = "Claude Code"
    setting_key: str = "claudeCode"
    binary_env: str | None = "OCTIPUS_CLAUDE_BINARY"
    default_binary: str = "claude"
    supports_resume: bool = True
    transports: tuple[str, ...] = ()
    config_env: frozenset[str] = launch.CONFIG_ENV
    api_key_env: frozenset[str] = launch.API_KEY_ENV
    space_mode: str | None = (
        "--permission-mode default (plan stays plan) with the stdio permission relay; no user, project or "
        "local settings (--setting-sources=) but a locked --settings file: no allow rules, bypass and auto "
        "mode disabled, no project MCP servers, the shell guard as the only hook"
    )

    def __init__(self, *, running_as_root: bool | None = None, shell_guard: str | None = None) -> None:
        self.running_as_root = _effective_uid_is_root() if running_as_root is None else running_as_root
        self.shell_guard_command = shell_guard if shell_guard is not None else shell_guard_command()

    def version_argv(self, binary: str) -> tuple[str, ...]:
        """Return ``(binary, "--version")``; it prints e.g. ``2.1.197 (Claude Code)`` in about 0.5 s."""
        return (binary, "--version")

    def parse_version(self, output: str) -> str | None:
        """Read the version from ``--version`` output (see :func:`octipus_claude_code.parse_version`)."""
        return control.parse_version(output)

    def build_launch(self, request: LaunchRequest) -> LaunchSpec:
        """Build argv, env, files and the first stdin line of one invocation.

        argv::

            <binary> -p --input-format stream-json --output-format stream-json --verbose
                --permission-prompt-tool stdio
                (--session-id=<id> | --resume=<id>)
                [--mcp-config=<run_dir>/claude-mcp-config.json] --strict-mcp-config
                --permission-mode=<acceptEdits|bypassPermissions|plan|default>
                [--disallowedTools=<Claude rule>]...
                [--model=<model>]
                [--append-system-prompt=<text>
                 | --append-system-prompt-file=<run_dir>/claude-append-system-prompt.txt]
                [additive flags]

        * ``--session-id`` on a first turn, ``--resume`` when ``request.resume``
          (observed.md §1.7); the id must be a UUID.
        * The MCP config file (written 0600 by the runner) is the only place the bridge token
          goes besides ``LaunchSpec.secrets``; it is never on argv. ``--strict-mcp-config`` is
          always passed so no other MCP server (user, project ``.mcp.json``, plugins) is loaded.
        * Permission modes: workspace -> acceptEdits (the default), full -> bypassPermissions,
          plan -> plan, default -> default (seed 003 "Permissions and limits").
        * ``request.denied_native`` (Octipus's native-tool DENY rules) become Claude's own deny list,
          one ``--disallowedTools=<rule>`` each (:mod:`octipus_claude_code.denials`), so they hold
          for the calls Claude approves itself; those that cannot be translated exactly stay
          relay-only and are named in ``LaunchSpec.notices``.
        * The system prompt goes to a file instead of argv above 64 KiB (a single argv entry is
          limited to 128 KiB on Linux).
        * Additive flags: only ``--no-session-persistence``, ``--no-chrome``,
          ``--disable-slash-commands``, ``--effort=<low|medium|high|xhigh|max>`` (seed 003).

        Space mode (``request.space``, see :mod:`octipus_claude_code.launch`): the permission mode
        becomes ``default`` (``plan`` stays ``plan``), and after ``--permission-mode`` come
        ``--setting-sources=`` and ``--settings=<run_dir>/claude-space-settings.json`` (the locked
        settings of :func:`octipus_claude_code.launch.space_settings`, in ``files``): no allow rules,
        bypass and auto mode disabled, no project MCP servers, and :attr:`shell_guard_command` as the
        only hook (``PreToolUse`` on ``Bash|Write|Edit|MultiEdit|NotebookEdit``). No tool is ever
        pre-approved with ``--allowedTools``, in a space or not.

        env: ``request.env`` without ``CLAUDECODE``, plus the quiet variables of observed.md §1.1,
        plus ``IS_SANDBOX=1`` for full mode as root (observed.md §1.9; never in a space, where full
        becomes default).

        initial_input: one stream-json user line holding ``request.prompt`` (observed.md §1.4).
        stdin stays open (``StdinMode.STREAM``) for permission answers.

        Args:
            request: The launch request.

        Returns:
            The launch spec.

        Raises:
            AdapterError: no or non-UUID vendor session id; a disallowed additive flag (the message
                names it and the allowed list); an invalid bridge endpoint; an unknown permission
                mode; a NUL character in the model name.
        """
        return launch.build_launch(
            request, running_as_root=self.running_as_root, guard_command=self.shell_guard_command
        )

    def new_parser(self, request: LaunchRequest | None = None) -> ClaudeStreamParser:
        """Return a fresh stream-json parser for one process's stdout (checking ``request.bridge``)."""
        return ClaudeStreamParser(request)

    def encode_permission_response(
        self, request: PermissionRequestEvent, decision: PermissionDecision
    ) -> str:
        """Encode the stdin answer to a ``can_use_tool`` request.

        See :func:`octipus_claude_code.encode_permission_response` for the shapes.
        """
        return control.encode_permission_response(request, decision)

    def encode_control_error(self, request_id: str, message: str) -> str:
        """Encode an error answer to an unsupported control request.

        See :func:`octipus_claude_code.encode_control_error` for the shape.
        """
        return control.encode_control_error(request_id, message)

    def encode_user_message(self, text: str) -> str:
        """Encode a stream-json user line, e.g. for steering.

        See :func:`octipus_claude_code.encode_user_message` for the shape.
        """
        return launch.encode_user_message(text)

    def encode_interrupt(self, request_id: str) -> str:
        """Encode an ``interrupt`` control request (see :func:`octipus_claude_code.encode_interrupt`)."""
        return control.encode_interrupt(request_id)

    def check_additive_flags(self, flags: Sequence[str]) -> tuple[str, ...]:
        """Validate additive flags (see :func:`~octipus_claude_code.launch.normalize_additive_flags`)."""
        return normalize_additive_flags(flags)

    def capabilities(self, options: Mapping[str, Any]) -> CapabilityRow:
        """Seed 003's row for the Claude-based adapters (see :data:`octipus_claude_code.control.CAPABILITIES`)."""
        return control.CAPABILITIES

    def follows_up(self, options: Mapping[str, Any]) -> bool:
        """Guidance left when Claude finished goes to a follow-up invocation of its session (seed 003)."""
        return True

    def after_result(self, event: VendorEvent) -> bool:
        """Claude announces its session (``system/init``) again at each turn it starts: also for the
        launch prompt, which a resumed Claude takes only after answering the notifications of the
        background tasks its earlier process left (:meth:`ClaudeStreamParser.prompt_pending`)."""
        return isinstance(event, SessionEvent)

    def new_session_id(self) -> str:
        """Mint Claude's session id for a first turn: a random UUID4 string (seed 003 "Session reuse")."""
        return str(uuid.uuid4())

    def mcp_failure(self, event: SessionEvent, server_name: str) -> str | None:
        """Reason the bridge is unusable per ``system/init``, or None.

        See :func:`octipus_claude_code.mcp_failure`.
        """
        return control.mcp_failure(event, server_name)

    def session_missing(self, result: ResultEvent) -> bool:
        """Whether the resumed conversation does not exist.

        See :func:`octipus_claude_code.session_missing`.
        """
        return control.session_missing(result)
