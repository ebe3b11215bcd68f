"""The Codex CLI adapter object (registered as ``codex`` in ``octipus.adapters``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from octipusd import __version__
from octipusd.adapter import (
    AdapterDefaults,
    CapabilityRow,
    ControlCancelEvent,
    LaunchRequest,
    LaunchSpec,
    PermissionDecision,
    PermissionRequestEvent,
    ResultEvent,
    SessionEvent,
    VendorEvent,
)

from . import control, launch, rpc
from .parser import CodexStreamParser


class CodexAdapter(AdapterDefaults):
    """OpenAI Codex CLI (``codex`` 0.171.0): ``app-server`` JSON-RPC (default) or ``exec --json``.

    Pure: no process, socket or database. Implements :class:`octipusd.adapter.Adapter`; see
    :mod:`octipus_codex` for what each protocol fact rests on. The transport comes from the model
    row's ``metadata.cliAgent.transport`` (``LaunchRequest.options["transport"]``):
    ``"app-server"`` (default; relays command and MCP approvals to Octipus) or ``"exec"`` (no
    relay: the sandbox alone decides).

    Attributes:
        name: ``codex``.
        display_name: ``Codex CLI``.
        setting_key: ``codexCli`` (the ``cliModels.codexCli`` binary setting).
        binary_env: ``OCTIPUS_CODEX_BINARY`` (its first-boot variable, seed 003).
        default_binary: ``codex``.
        supports_resume: True: Codex assigns the thread id (captured from the
            :class:`~octipusd.adapter.SessionEvent`), Octipus resumes it.
        config_env: :data:`octipus_codex.launch.CONFIG_ENV`.
        api_key_env: :data:`octipus_codex.launch.API_KEY_ENV`.
        space_mode: The declared space mode (seed 003 "In shared spaces"; read by
            ``octipusd.policy.spaces.check_space_model``): the read-only sandbox with approval
            policy ``never``, on both transports, whatever the row's permission mode.
        tool_aliases: Codex's item names that behave like Claude tools
            (:data:`octipus_codex.control.TOOL_ALIASES`).
    """

    name: str = "codex"
    display_name: str = "Codex CLI"
    setting_key: str = "codexCli"
    binary_env: str | None = "OCTIPUS_CODEX_BINARY"
    default_binary: str = "codex"
    supports_resume: bool = True
    transports: tuple[str, ...] = launch.TRANSPORTS
    config_env: frozenset[str] = launch.CONFIG_ENV
    api_key_env: frozenset[str] = launch.API_KEY_ENV
    space_mode: str | None = (
        "read-only sandbox with approval policy never (nothing escalates out of it), whatever the row's "
        "permission mode"
    )
    tool_aliases: Mapping[str, str] = control.TOOL_ALIASES

    def version_argv(self, binary: str) -> tuple[str, ...]:
        """Return ``(binary, "--version")``; it prints ``codex-cli 0.171.0`` in about 0.1 s."""
        return (binary, "--version")

    def parse_version(self, output: str) -> str | None:
        """Read the version from ``--version`` output (see :func:`octipus_codex.parse_version`)."""
        return control.parse_version(output)

    def build_launch(self, request: LaunchRequest) -> LaunchSpec:
        """Build argv, env and the first stdin lines of one invocation.

        app-server (default)::

            <binary> app-server --disable plugins --disable remote_plugin
                -c analytics.enabled=false -c check_for_update_on_startup=false [--strict-config]

        stdin stays open (``StdinMode.STREAM``); ``initial_input`` is ``initialize``,
        ``initialized`` and ``config/read``; the parser then sends ``thread/start`` (or
        ``thread/resume`` with the stored id, sandbox and bridge sent again) and ``turn/start``
        with the prompt (:mod:`octipus_codex.rpc`, :func:`octipus_codex.launch.app_server_plan`).

        exec: see :func:`octipus_codex.launch.exec_argv`; stdin is ``/dev/null`` (observed.md
        §2.1: an open pipe blocks exec until EOF).

        Both: sandbox per permission mode (workspace -> ``workspace-write``, full ->
        ``danger-full-access``, plan and default -> ``read-only``; app-server approval policy
        ``untrusted`` for workspace/default, so every command is relayed, ``never`` for
        full/plan); the bridge as ``mcp_servers.<name>`` with ``bearer_token_env_var =
        "OCTIPUS_BRIDGE_TOKEN"``, ``required = true``, ``default_tools_approval_mode = "approve"``;
        the token only in the child's environment and in ``LaunchSpec.secrets``;
        ``request.model`` as ``--model`` / ``model``; the system prompt as developer
        instructions; additive flags ``--strict-config`` and ``--color`` only.

        In a shared space (``request.space``) both transports use the ``plan`` mapping whatever the
        row says: sandbox ``read-only``, approval policy ``never``
        (:func:`octipus_codex.launch.effective_mode`).

        Args:
            request: The launch request.

        Returns:
            The launch spec.

        Raises:
            AdapterError: an unknown transport or permission mode, a disallowed additive flag (the
                message names it and the allowed list), an invalid bridge, a resume without an id;
                for exec also a non-UUID resume id or a prompt too long for argv.
        """
        return launch.build_launch(request, version=__version__)

    def new_parser(self, request: LaunchRequest | None = None) -> CodexStreamParser:
        """Return a fresh parser for one process's stdout (either transport).

        Args:
            request: The launch the output belongs to; an app-server run needs it, since the parser
                sends the thread and turn requests built from it (:class:`CodexStreamParser`).
        """
        return CodexStreamParser(request)

    def encode_permission_response(
        self, request: PermissionRequestEvent, decision: PermissionDecision
    ) -> str:
        """Encode the JSON-RPC answer to an approval request (see :func:`octipus_codex.rpc.encode_permission_response`)."""
        return rpc.encode_permission_response(request, decision)

    def encode_control_error(self, request_id: str, message: str) -> str:
        """Encode a JSON-RPC error answer to a server request (see :func:`octipus_codex.rpc.encode_control_error`)."""
        return rpc.encode_control_error(request_id, message)

    def capabilities(self, options: Mapping[str, Any]) -> CapabilityRow:
        """The row's capabilities per transport (see :func:`octipus_codex.control.capabilities`)."""
        return control.capabilities(options)

    def follows_up(self, options: Mapping[str, Any]) -> bool:
        """Guidance left when Codex finished goes to a follow-up invocation of its thread (seed 003)."""
        return True

    def after_result(self, event: VendorEvent) -> bool:
        """app-server sends ``serverRequest/resolved`` (:class:`~octipusd.adapter.ControlCancelEvent`)
        after an interrupted ``turn/completed`` for the approval request still pending then
        (observed-2.md §1.3): it withdraws that relayed approval."""
        return isinstance(event, ControlCancelEvent)

    def new_session_id(self) -> str | None:
        """Codex assigns the thread id itself (seed 003 "Session reuse"), so none is minted."""
        return None

    def check_additive_flags(self, flags: Sequence[str]) -> tuple[str, ...]:
        """Validate a model row's additive flags (see :func:`octipus_codex.normalize_additive_flags`)."""
        return launch.normalize_additive_flags(flags)

    def session_missing(self, result: ResultEvent) -> bool:
        """Whether the resumed thread does not exist (see :func:`octipus_codex.session_missing`)."""
        return control.session_missing(result)

    def stderr_session_missing(self, stderr: str) -> bool:
        """Whether an exec run's stderr says the resumed thread does not exist (see
        :func:`octipus_codex.stderr_session_missing`)."""
        return control.stderr_session_missing(stderr)

    def usage_is_cumulative(self, request: LaunchRequest) -> bool:
        """Whether the run's usage includes the thread's earlier turns (resumed exec runs only; see
        :func:`octipus_codex.usage_is_cumulative`)."""
        return control.usage_is_cumulative(request)

    def mcp_failure(self, event: SessionEvent, server_name: str) -> str | None:
        """Reason the bridge is unusable per the session announcement (see :func:`octipus_codex.mcp_failure`)."""
        return control.mcp_failure(event, server_name)
