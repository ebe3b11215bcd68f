"""The Antigravity adapter object (registered as ``antigravity`` in ``octipus.adapters``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from octipusd.adapter import (
    AdapterDefaults,
    CapabilityRow,
    LaunchRequest,
    LaunchSpec,
    PermissionDecision,
    PermissionRequestEvent,
    ResultEvent,
)
from octipusd.errors import AdapterError

from . import launch
from .parser import AntigravityTextParser

#: Seed 003's "Permissions and limits" row of Antigravity.
CAPABILITIES: Final = CapabilityRow(
    adapter="Antigravity",
    octipus_tools="Terminal bridge",
    vendor_planning_mode="plan mode",
    activity="Buffered text",
    vendor_approval_relay="Vendor mode; no interactive relay",
)


class AntigravityAdapter(AdapterDefaults):
    """Google Antigravity CLI (``agy``) in print mode. Pure: no process, socket or database.

    Implements :class:`octipusd.adapter.Adapter`; see :mod:`octipus_antigravity` for what each
    protocol fact rests on (sources.md §4, seed 003).

    Args:
        bridge_helper: Absolute path of the ``octipus-bridge`` terminal helper the agent uses to
            reach the run's bridge. None (the default, what the entry point uses) means
            ``octipus-bridge`` next to ``sys.executable``: the console script installed with the
            daemon in the same ``bin`` folder (:func:`octipus_antigravity.launch.default_helper`).

    Attributes:
        name: ``antigravity``.
        display_name: ``Antigravity CLI``.
        setting_key: ``antigravityCli`` (the ``cliModels.antigravityCli`` binary setting).
        binary_env: ``OCTIPUS_ANTIGRAVITY_BINARY`` (its first-boot variable).
        default_binary: ``agy``.
        supports_resume: False: print mode prints no conversation id and a stale id silently starts
            a new conversation, so Octipus never resumes agy (seed 003 "Session reuse").
        config_env: :data:`octipus_antigravity.launch.CONFIG_ENV`.
        api_key_env: :data:`octipus_antigravity.launch.API_KEY_ENV`.
        bridge_helper: The helper path the instructions name (the runtime puts its folder on ``PATH``).
        space_mode: The declared space mode (seed 003 "In shared spaces"; read by
            ``octipusd.policy.spaces.check_space_model``): ``--mode plan`` whatever the row says.
    """

    name: str = "antigravity"
    display_name: str = "Antigravity CLI"
    setting_key: str = "antigravityCli"
    binary_env: str | None = "OCTIPUS_ANTIGRAVITY_BINARY"
    default_binary: str = "agy"
    supports_resume: bool = False
    transports: tuple[str, ...] = ()
    config_env: frozenset[str] = launch.CONFIG_ENV
    api_key_env: frozenset[str] = launch.API_KEY_ENV
    space_mode: str | None = "--mode plan (read-only planning) whatever the row's permission mode"

    def __init__(self, *, bridge_helper: str | None = None) -> None:
        self.bridge_helper = bridge_helper or launch.default_helper()

    def version_argv(self, binary: str) -> tuple[str, ...]:
        """Return ``(binary, "--version")`` (``-v/--version`` in the official zsh completion)."""
        return (binary, "--version")

    def build_launch(self, request: LaunchRequest) -> LaunchSpec:
        """Build argv and env of one print-mode invocation.

        argv::

            <binary> [--mode plan | --mode accept-edits [--dangerously-skip-permissions]]
                [--add-dir=<cwd>]                       (workspace, full)
                [--add-dir=<run_dir>]                   (prompt too long: written to a file there)
                [--model=<model>]
                [--print-timeout=<N>s]                  (options.printTimeoutSeconds, default 7200)
                [--disable-slash-commands] [--effort=<low|medium|high>]
                --print=<prompt>

        * The prompt is Octipus's instructions, the ``octipus-bridge`` guide (with a bridge) and
          the user's text (:func:`octipus_antigravity.launch.compose_prompt`); above 100 KiB it is
          written to ``<run_dir>/agy-prompt.md`` and argv points the agent at it.
        * The bridge capability is never on argv: the runtime gives the child's environment
          ``OCTIPUS_BRIDGE_URL`` and ``OCTIPUS_BRIDGE_TOKEN`` and appends the helper's folder to
          ``PATH``, as for every vendor (:func:`octipusd.adapter_launch.with_bridge_helper`); the token is in
          ``secrets``.
        * Permission modes: see :data:`octipus_antigravity.launch.PERMISSION_ARGS`; in a shared
          space (``request.space``) always ``--mode plan``.
        * No resume flag is ever passed; stdin is ``/dev/null``; nothing is written to stdin.

        Args:
            request: The launch request (``options``: the model row's ``metadata.cliAgent``; this
                adapter reads ``printTimeoutSeconds``).

        Returns:
            The launch spec.

        Raises:
            AdapterError: ``request.resume`` is set; an unknown permission mode; a disallowed additive
                flag (the message names it and the allowed list); a bad ``printTimeoutSeconds``; an
                invalid bridge endpoint; a NUL character in the model name.
        """
        return launch.build_launch(request, helper=self.bridge_helper)

    def input_text(self, request: LaunchRequest) -> str:
        """Return the prompt text agy receives for ``request`` (the input of the usage estimate).

        Args:
            request: The launch request.

        Returns:
            The composed prompt (instructions, bridge guide, task).
        """
        return launch.compose_prompt(request, self.bridge_helper)

    def new_parser(self, request: LaunchRequest | None = None) -> AntigravityTextParser:
        """Return a fresh buffered-text parser for one run's stdout.

        Args:
            request: The run's launch request; its composed prompt length is the input side of the
                usage estimate. Without it the input is estimated as 0 tokens.

        Returns:
            The parser.
        """
        chars = len(self.input_text(request)) if request is not None else 0
        return AntigravityTextParser(input_chars=chars)

    def capabilities(self, options: Mapping[str, Any]) -> CapabilityRow:
        """The row's capabilities (:data:`CAPABILITIES`; agy runs one way only)."""
        return CAPABILITIES

    def check_additive_flags(self, flags: Sequence[str]) -> tuple[str, ...]:
        """Validate additive flags (see :func:`octipus_antigravity.launch.normalize_additive_flags`)."""
        return launch.normalize_additive_flags(flags)

    def encode_permission_response(
        self, request: PermissionRequestEvent, decision: PermissionDecision
    ) -> str:
        """agy has no permission relay (seed 003: "Vendor mode; no interactive relay").

        Raises:
            AdapterError: always; the parser never emits a :class:`PermissionRequestEvent`.
        """
        raise AdapterError("antigravity has no permission relay: agy print mode asks Octipus nothing")

    def encode_control_error(self, request_id: str, message: str) -> str:
        """agy has no control protocol on stdin (stdin is ``/dev/null``).

        Raises:
            AdapterError: always; the parser never emits a control request.
        """
        raise AdapterError("antigravity has no control protocol: agy print mode reads no stdin")

    def new_session_id(self) -> str | None:
        """Return None: Octipus never mints or resumes an agy conversation (seed 003 "Session reuse")."""
        return None

    def session_missing(self, result: ResultEvent) -> bool:
        """Return False: agy is never resumed, so there is no missing session to detect."""
        return False
