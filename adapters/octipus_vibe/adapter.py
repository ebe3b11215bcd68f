"""The Mistral Vibe adapter object (registered as ``vibe`` in ``octipus.adapters``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from octipusd import __version__ as OCTIPUS_VERSION
from octipusd.adapter import (
    AdapterDefaults,
    CapabilityRow,
    LaunchRequest,
    LaunchSpec,
    PermissionDecision,
    PermissionRequestEvent,
    ResultEvent,
)

from . import acp, launch, signals
from .parser import VibeParser

#: Seed 003's "Permissions and limits" row of Vibe over ACP (the default transport) and headless.
CAPABILITIES: Final = CapabilityRow(
    adapter="Mistral Vibe",
    octipus_tools="Scoped MCP",
    vendor_planning_mode="plan agent",
    activity="Structured stream over ACP",
    vendor_approval_relay="ACP permission requests enter Octipus approvals",
)
HEADLESS_CAPABILITIES: Final = CapabilityRow(
    adapter="Mistral Vibe",
    octipus_tools="Scoped MCP",
    vendor_planning_mode="plan agent",
    activity="Buffered",
    vendor_approval_relay="Vendor agent mode; no interactive relay",
)


class VibeAdapter(AdapterDefaults):
    """Mistral Vibe 3.x (``vibe-acp`` over ACP by default, ``vibe -p`` headless on request).

    Pure: no process, socket, file or database. Implements :class:`octipusd.adapter.Adapter`; see
    :mod:`octipus_vibe` for what each protocol fact rests on.

    Attributes:
        name: ``vibe``.
        display_name: ``Mistral Vibe``.
        setting_key: ``mistralVibe`` (the ``cliModels.mistralVibe.binaryPath`` setting).
        binary_env: ``OCTIPUS_VIBE_BINARY`` (its first-boot variable).
        default_binary: ``vibe-acp`` (the ACP entry point; ``vibe`` next to it serves headless runs).
        supports_resume: True: Vibe assigns the session id (ACP ``session/new`` result, headless
            ``sessionId``) and continues it (ACP ``session/load``, headless ``--resume``); an unknown
            id gives ``Session not found: <id>`` (:meth:`session_missing`).
        config_env: :data:`octipus_vibe.launch.CONFIG_ENV`.
        api_key_env: :data:`octipus_vibe.launch.API_KEY_ENV`.
        space_mode: None: Vibe declares no space mode, so it is refused in shared spaces (seed 003
            "In shared spaces"; ``octipusd.policy.spaces.check_space_model`` reads this, and
            :meth:`build_launch` refuses a space request too).
    """

    name: str = "vibe"
    display_name: str = "Mistral Vibe"
    setting_key: str = "mistralVibe"
    binary_env: str | None = "OCTIPUS_VIBE_BINARY"
    default_binary: str = launch.ACP_BINARY_NAME
    supports_resume: bool = True
    transports: tuple[str, ...] = launch.TRANSPORTS
    config_env: frozenset[str] = launch.CONFIG_ENV
    api_key_env: frozenset[str] = launch.API_KEY_ENV
    space_mode: str | None = None

    def version_argv(self, binary: str) -> tuple[str, ...]:
        """Return ``(binary, "--version")``: ``vibe-acp 3.0.2`` / ``vibe 3.0.2`` on the pinned install."""
        return (binary, "--version")

    def parse_version(self, output: str) -> str | None:
        """Read the version from ``--version`` output (see :func:`octipus_vibe.parse_version`)."""
        return signals.parse_version(output)

    def build_launch(self, request: LaunchRequest) -> LaunchSpec:
        """Build argv, env, files and the first stdin lines of one invocation.

        ACP (``options["transport"]`` absent or ``"acp"``)::

            argv   <dir>/vibe-acp                  (a configured .../vibe maps to its sibling)
            stdin  STREAM; initial_input:
                   {"jsonrpc":"2.0","id":"octipus/initialize","method":"initialize",...}
                   {"jsonrpc":"2.0","id":"octipus/session:<plan>","method":"session/new",
                    "params":{"cwd":<cwd>,"mcpServers":[{"type":"http","name":"octipus",
                    "url":<bridge url>,"headers":[{"name":"Authorization","value":"Bearer <token>"}]}]}}
                   (session/load with "sessionId" when request.resume)

        The parser then sends ``session/set_mode`` (when needed) and ``session/prompt``
        (:mod:`octipus_vibe.acp`). The bridge token is only inside the session request on the
        stdin pipe.

        Headless (``options["transport"] == "headless"``)::

            argv   /bin/sh -c <WRAPPER> octipus-vibe-headless <header> <run_dir>/vibe-output
                   <dir>/vibe --prompt-file <run_dir>/vibe-prompt.txt --output streaming
                   --agent <mode> --max-turns <N> --max-tokens <N> --workdir <cwd>
                   --output-dir <run_dir>/vibe-output [--resume=<id>]
            stdin  DEVNULL
            files  <run_dir>/vibe-prompt.txt (the prompt; kept off argv and ``ps``)
            env    VIBE_MCP_SERVERS=[{"name":"octipus","transport":"streamable-http","url":...,
                   "auth":{"type":"static","api_key_env":"OCTIPUS_BRIDGE_TOKEN"}}]
                   (the runtime sets OCTIPUS_BRIDGE_TOKEN, as on every launch with a bridge)

        Both: permission mode -> Vibe mode (:data:`octipus_vibe.VIBE_MODES`); ``turn_limit`` /
        ``token_limit`` (defaults :data:`octipus_vibe.DEFAULT_TURN_LIMIT`,
        :data:`octipus_vibe.DEFAULT_TOKEN_LIMIT`) are Vibe's own ``--max-turns`` / ``--max-tokens``
        in headless mode and enforced by the ACP parser with ``session/cancel``; ``system_prompt``
        heads the prompt text (:func:`octipus_vibe.compose_prompt`); ``model`` becomes
        ``VIBE_ACTIVE_MODEL`` (a Vibe model alias); env is ``request.env`` plus
        :data:`octipus_vibe.QUIET_ENV`. ``LaunchSpec.secrets`` holds the bridge token.

        Args:
            request: The launch request.

        Returns:
            The launch spec.

        Raises:
            AdapterError: a run in a shared space (``request.space``): Vibe declares no space mode
                (:data:`octipus_vibe.launch.SPACE_REFUSAL`); any additive flag (Vibe has none); an
                unknown transport or permission mode;
                a resume without a session id; an invalid bridge endpoint; a non-positive limit; a
                NUL character in a value that goes on the command line or in the environment.
        """
        return launch.build_launch(request, client_version=OCTIPUS_VERSION)

    def new_parser(self, request: LaunchRequest | None = None) -> VibeParser:
        """Return a fresh parser for one process's stdout (either transport).

        Args:
            request: The launch the output belongs to, or None. Not needed: everything the parser
                acts on travels in the stream itself (the ACP session plan in the session request's
                id, the headless wrapper's header line), so a recorded stream parses the same.
        """
        del request
        return VibeParser()

    def encode_permission_response(
        self, request: PermissionRequestEvent, decision: PermissionDecision
    ) -> str:
        """Encode the answer to ``session/request_permission`` (see :func:`octipus_vibe.encode_permission_response`)."""
        return acp.encode_permission_response(request, decision)

    def encode_control_error(self, request_id: str, message: str) -> str:
        """Encode a JSON-RPC error for an agent request Octipus does not serve.

        See :func:`octipus_vibe.encode_control_error`; the parser already answers such requests itself.
        """
        return acp.encode_control_error(request_id, message)

    def new_session_id(self) -> None:
        """None: Vibe assigns the session id (ACP ``session/new`` result, headless ``sessionId``)."""
        return None

    def resumable(self, options: Mapping[str, object]) -> bool:
        """Whether a launch with these options takes part in session reuse (seed 003).

        Decision: Vibe driven through ACP does (``session/load`` names the session explicitly and
        answers an unknown id with JSON-RPC error -32602 ``Session not found``, observed.md §3.5, so a
        lost session is detected and retried cold). Headless Vibe does not: its ``--resume``
        depends on the user's ``log_interactions`` setting, which Octipus neither controls nor
        can verify (seed 003 "Session reuse").
        """
        return launch.transport_of(options) != launch.TRANSPORT_HEADLESS

    def capabilities(self, options: Mapping[str, Any]) -> CapabilityRow:
        """The row's capabilities: :data:`CAPABILITIES` over ACP, :data:`HEADLESS_CAPABILITIES` headless."""
        return (
            HEADLESS_CAPABILITIES if options.get("transport") == launch.TRANSPORT_HEADLESS else CAPABILITIES
        )

    def check_additive_flags(self, flags: Sequence[str]) -> tuple[str, ...]:
        """Refuse every additive flag: Vibe has none (see :func:`octipus_vibe.check_additive_flags`)."""
        return launch.check_additive_flags(flags)

    def session_missing(self, result: ResultEvent) -> bool:
        """Whether the resumed session does not exist (see :func:`octipus_vibe.session_missing`)."""
        return signals.session_missing(result)
