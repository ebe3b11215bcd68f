"""Building one Vibe invocation: argv, environment, files and the first stdin lines.

Two transports, chosen by the model row's ``metadata.cliAgent.transport`` (``LaunchRequest.options``):

* ``acp`` (default): ``vibe-acp`` speaking the Agent Client Protocol on stdio, with Vibe's
  permission requests relayed to Octipus, ``session/load`` resume and reported usage
  (observed.md §3.5; :mod:`octipus_vibe.acp`).
* ``headless``: ``vibe --prompt-file F --output streaming`` (seed 003's buffered mode), no relay:
  tools that need approval are denied by Vibe itself unless the permission mode is ``full``
  (observed.md §3.3; :mod:`octipus_vibe.headless`).

Permission modes (seed 003 "Permissions and limits"; Vibe 3.0.2's modes / agents are ``ask``,
``accept-edits``, ``auto-approve`` (+ ``smart-approve`` in headless), the ACP ``availableModes``
of a new session list the first three):

=========== ================ ============================================================
Octipus     Vibe             why
=========== ================ ============================================================
workspace   ``accept-edits`` file edits run, everything else asks (Vibe's own default)
full        ``auto-approve`` Vibe's bypass
default     ``ask``          every tool execution asks
plan        ``ask``          Vibe 3.0.2 removed its read-only ``plan`` agent and maps it to
                             ``ask`` itself (``REMOVED_BUILTIN_AGENTS``); in ACP every tool
                             execution is then decided by Octipus, in headless mode it is
                             denied (read-only in effect)
=========== ================ ============================================================

The mode is always set explicitly (ACP ``session/set_mode`` when the new session's
``currentModeId`` differs, e.g. because the user's ``default_agent`` is another one; headless
``--agent``), and ``VIBE_BYPASS_TOOL_PERMISSIONS=false`` is set so a stray variable cannot turn
the relay off (the ``auto-approve`` agent's own override still wins for ``full``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from octipusd.adapter import BridgeEndpoint, LaunchRequest, LaunchSpec, PermissionMode, StdinMode
from octipusd.adapter_launch import BRIDGE_TOKEN_ENV
from octipusd.errors import AdapterError

from .acp import (
    INITIALIZE_ID,
    SessionPlan,
    encode_request,
    initialize_params,
    mcp_server_entry,
    prompt_blocks,
    session_request as acp_session_request,
)
from .headless import WRAPPER, WRAPPER_NAME, HeadlessHeader

#: Transports (``LaunchRequest.options["transport"]``).
TRANSPORT_ACP: Final = "acp"
TRANSPORT_HEADLESS: Final = "headless"
TRANSPORTS: Final = (TRANSPORT_ACP, TRANSPORT_HEADLESS)
DEFAULT_TRANSPORT: Final = TRANSPORT_ACP

#: Octipus permission mode -> Vibe ACP mode id / headless ``--agent`` (module docstring).
VIBE_MODES: Final[Mapping[PermissionMode, str]] = {
    PermissionMode.WORKSPACE: "accept-edits",
    PermissionMode.FULL: "auto-approve",
    PermissionMode.DEFAULT: "ask",
    PermissionMode.PLAN: "ask",
}

#: Turn cap when the request gives none: model steps per run (headless ``--max-turns``; ACP: the
#: parser cancels the prompt past it). A backstop, not a budget.
DEFAULT_TURN_LIMIT: Final = 200
#: Token cap when the request gives none: prompt + completion tokens per run (headless
#: ``--max-tokens``, Vibe's own cap; ACP: the parser cancels past it). A backstop, not a budget.
DEFAULT_TOKEN_LIMIT: Final = 20_000_000

#: Set on top of the request's environment: no update checks, self-updates, desktop notifications
#: or telemetry from a daemon-driven CLI, and no bypass unless the mode asks for it. Vibe reads
#: any config field from ``VIBE_<FIELD>`` (pydantic-settings, above the user's and the project's
#: config.toml; ``vibe/core/config/layers/environment.py``).
QUIET_ENV: Final[Mapping[str, str]] = {
    "VIBE_ENABLE_TELEMETRY": "false",
    "VIBE_ENABLE_UPDATE_CHECKS": "false",
    "VIBE_ENABLE_AUTO_UPDATE": "false",
    "VIBE_ENABLE_NOTIFICATIONS": "false",
    "VIBE_BYPASS_TOOL_PERMISSIONS": "false",
}

#: Vibe's own configuration variables passed from the daemon's environment: ``VIBE_HOME`` and any
#: ``VIBE_<FIELD>`` config override (sources.md §3.3). Vibe also loads ``$VIBE_HOME/.env``, where
#: its setup stores the provider keys; a provider's ``api_key_env_var`` kept in the daemon's
#: environment instead is listed in the row's ``metadata.cliAgent.passEnv``.
CONFIG_ENV: Final[frozenset[str]] = frozenset({"VIBE_*"})
#: Mistral's API-key variable (Vibe's default provider), passed only with ``inheritApiKeys``.
API_KEY_ENV: Final[frozenset[str]] = frozenset({"MISTRAL_API_KEY"})

#: Environment variable that selects the model alias (Vibe's ``active_model``).
MODEL_ENV: Final = "VIBE_ACTIVE_MODEL"
#: Environment variable holding Vibe's extra MCP servers (JSON list; headless only).
MCP_SERVERS_ENV: Final = "VIBE_MCP_SERVERS"

#: Files and folders written in the run directory (headless).
PROMPT_FILE_NAME: Final = "vibe-prompt.txt"
OUTPUT_DIR_NAME: Final = "vibe-output"

#: The shell running the headless wrapper.
SHELL: Final = "/bin/sh"

#: The ``vibe-acp`` and ``vibe`` console scripts live side by side (one pip install).
ACP_BINARY_NAME: Final = "vibe-acp"
HEADLESS_BINARY_NAME: Final = "vibe"


def check_additive_flags(flags: Sequence[str]) -> tuple[str, ...]:
    """Validate a model row's additive flags: Vibe has none (seed 003 "Permissions and limits").

    Args:
        flags: The row's additive flags.

    Returns:
        ``()`` when ``flags`` is empty.

    Raises:
        AdapterError: any flag; the message names it and says that Vibe has no additive flags.
    """
    for flag in flags:
        raise AdapterError(
            f"additive flag {flag!r} is not allowed for Mistral Vibe: Vibe has no additive flags "
            "(use the model settings for the model, permissions and limits)"
        )
    return ()


def transport_of(options: Mapping[str, object]) -> str:
    """The transport a launch uses.

    Args:
        options: The model row's ``metadata.cliAgent`` (``LaunchRequest.options``).

    Returns:
        ``options["transport"]`` (``acp`` or ``headless``), or :data:`DEFAULT_TRANSPORT` when absent.

    Raises:
        AdapterError: an unknown transport (the message lists the known ones).
    """
    value = options.get("transport", DEFAULT_TRANSPORT)
    if value is None:
        return DEFAULT_TRANSPORT
    if value not in TRANSPORTS:
        raise AdapterError(
            f"unknown Mistral Vibe transport {value!r} in metadata.cliAgent.transport; use one of {', '.join(TRANSPORTS)}"
        )
    return str(value)


def permission_mode_of(request: LaunchRequest) -> PermissionMode:
    """The request's permission mode.

    Args:
        request: The launch request.

    Returns:
        ``request.permission_mode`` as :class:`PermissionMode`.

    Raises:
        AdapterError: an unknown mode (the message lists the known ones).
    """
    try:
        return PermissionMode(request.permission_mode)
    except ValueError:
        raise AdapterError(
            f"unknown permission mode {request.permission_mode!r}; expected one of "
            f"{', '.join(m.value for m in PermissionMode)}"
        ) from None


def compose_prompt(prompt: str, system_prompt: str | None) -> str:
    """The text handed to Vibe: ``system_prompt`` (if any) in a tagged block, then the prompt.

    Vibe has no option to append to its system prompt (neither ACP nor the CLI; its
    ``system_prompt_id`` only selects a whole prompt file), so Octipus's instructions travel at the
    head of the turn's user text::

        <system-instructions>
        ...
        </system-instructions>

        <prompt>

    Args:
        prompt: The turn's text.
        system_prompt: Octipus's instructions, or None.

    Returns:
        The combined text.
    """
    if not system_prompt or not system_prompt.strip():
        return prompt
    return f"<system-instructions>\n{system_prompt.strip()}\n</system-instructions>\n\n{prompt}"


def sibling_binary(binary: str, name: str) -> str:
    """``binary`` itself when its file name is ``name``, else the sibling file called ``name``.

    ``vibe`` and ``vibe-acp`` are console scripts of one package, installed side by side, so a row
    configured with either path works for both transports.

    Args:
        binary: The resolved executable (``cliModels.mistralVibe.binaryPath``).
        name: ``vibe-acp`` or ``vibe``.
    """
    path = Path(binary)
    if path.name in (ACP_BINARY_NAME, HEADLESS_BINARY_NAME) and path.name != name:
        return str(path.with_name(name))
    return binary


def check_bridge(bridge: BridgeEndpoint) -> None:
    """Refuse a bridge endpoint Vibe cannot use (messages never include the token).

    Args:
        bridge: The run's bridge endpoint.

    Raises:
        AdapterError: the URL is not http(s), the server name is not ``[A-Za-z0-9_-]+`` (Vibe
            derives the connector group ``mcp_<name>`` from it), or the token is empty or not
            header-safe.
    """
    if not bridge.url.startswith(("http://", "https://")):
        raise AdapterError(f"bridge URL {bridge.url!r} is not an http(s) URL")
    name = bridge.server_name
    if not name or not all(c.isascii() and (c.isalnum() or c in "-_") for c in name):
        raise AdapterError(f"bridge server name {name!r} must be non-empty ASCII letters, digits, '-' or '_'")
    token = bridge.token
    if not token or not all(c.isascii() and c.isprintable() and not c.isspace() for c in token):
        raise AdapterError("bridge token must be a non-empty printable ASCII string without spaces")


def _limit(value: int | None, default: int, what: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AdapterError(f"{what} must be a positive integer, got {value!r}")
    return value


def _resume_id(request: LaunchRequest) -> str | None:
    if not request.resume:
        return None
    value = request.vendor_session_id
    if not value or "\x00" in value or not value.strip():
        raise AdapterError(
            "mistral vibe needs the stored vendor session id to resume (the id Vibe reported in the "
            "earlier turn's session)"
        )
    return value


def child_env(request: LaunchRequest, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: the request's, plus :data:`QUIET_ENV`, the model and ``extra``.

    Args:
        request: The launch request (``env``: the runtime's filtered environment; ``model``: a
            Vibe model alias, set as :data:`MODEL_ENV`).
        extra: Transport-specific variables (headless: the bridge's server list; its token is the
            adapter protocol's :data:`~octipusd.adapter_launch.BRIDGE_TOKEN_ENV`, which the runtime sets on
            every launch with a bridge).

    Returns:
        A new dict. ``VIBE_HOME`` and the provider key variables pass through unchanged: the run uses
        the user's own Vibe configuration and login (seed 003 "Authentication and fallback").

    Raises:
        AdapterError: the model name contains a NUL character.
    """
    env = dict(request.env)
    env.update(QUIET_ENV)
    if request.model:
        if "\x00" in request.model:
            raise AdapterError("model name contains a NUL character")
        env[MODEL_ENV] = request.model
    env.update(extra or {})
    return env


def build_acp_launch(request: LaunchRequest, *, client_version: str) -> LaunchSpec:
    """Build the ACP launch (see :meth:`octipus_vibe.VibeAdapter.build_launch`).

    Args:
        request: The launch request.
        client_version: Octipus's version for ``initialize.clientInfo``.

    Returns:
        argv ``(<vibe-acp>,)``, stdin ``STREAM``, ``initial_input`` = ``initialize`` and
        ``session/new`` (or ``session/load``) carrying the bridge and the :class:`SessionPlan`.

    Raises:
        AdapterError: see :meth:`octipus_vibe.VibeAdapter.build_launch`.
    """
    mode = permission_mode_of(request)
    resume = _resume_id(request)
    servers = []
    secrets: tuple[str, ...] = ()
    if request.bridge is not None:
        check_bridge(request.bridge)
        servers.append(mcp_server_entry(request.bridge.server_name, request.bridge.url, request.bridge.token))
        secrets = (request.bridge.token,)
    plan = SessionPlan(
        prompt=prompt_blocks(compose_prompt(request.prompt, request.system_prompt)),
        mode=VIBE_MODES[mode],
        bridge=request.bridge.server_name if request.bridge is not None else None,
        resume=resume,
        turn_limit=_limit(request.turn_limit, DEFAULT_TURN_LIMIT, "turn_limit"),
        token_limit=_limit(request.token_limit, DEFAULT_TOKEN_LIMIT, "token_limit"),
    )
    initial = (
        encode_request(INITIALIZE_ID, "initialize", initialize_params(client_version)),
        acp_session_request(plan=plan, cwd=str(request.cwd), mcp_servers=servers),
    )
    return LaunchSpec(
        argv=(sibling_binary(request.binary, ACP_BINARY_NAME),),
        env=child_env(request),
        cwd=request.cwd,
        files={},
        stdin_mode=StdinMode.STREAM,
        initial_input=initial,
        secrets=secrets,
    )


def headless_mcp_servers(bridge: BridgeEndpoint) -> str:
    """The :data:`MCP_SERVERS_ENV` value pointing headless Vibe at the bridge.

    Shape (Vibe's ``[[mcp_servers]]`` schema as JSON; observed.md §3.2)::

        [{"name": "<server_name>", "transport": "streamable-http", "url": "<url>",
          "auth": {"type": "static", "api_key_env": "OCTIPUS_BRIDGE_TOKEN"},
          "tool_timeout_sec": <seconds>}]

    ``tool_timeout_sec`` (Vibe's default: 60 s) is the bridge's
    :attr:`~octipusd.adapter.BridgeEndpoint.tool_timeout_seconds` (seed 003: two hours). The ACP
    transport has no such field: ACP's ``mcpServers`` entry carries none, and Vibe 3.0.2 gives a
    session's servers its 60 s default.

    Vibe sends ``Authorization: Bearer <$OCTIPUS_BRIDGE_TOKEN>`` (its default
    ``api_key_header`` / ``api_key_format``); checked on 3.0.2: the bridge received the call. The
    list is merged with the user's config.toml servers by name (Vibe's union merge), so a user
    server named like the bridge is replaced by it.

    Args:
        bridge: The run's bridge endpoint (its token is not part of the value).

    Returns:
        The JSON text.
    """
    entry = {
        "name": bridge.server_name,
        "transport": "streamable-http",
        "url": bridge.url,
        "auth": {"type": "static", "api_key_env": BRIDGE_TOKEN_ENV},
        "tool_timeout_sec": bridge.tool_timeout_seconds,
    }
    return json.dumps([entry], separators=(",", ":"))


def headless_notice(bridge: BridgeEndpoint | None, agent: str) -> str | None:
    """The note a headless run shows when its bridge tools cannot run.

    Args:
        bridge: The run's bridge, or None.
        agent: The ``--agent`` Vibe runs with.

    Returns:
        The note, or None when there is no bridge or the agent is ``auto-approve``.
    """
    if bridge is None or agent == VIBE_MODES[PermissionMode.FULL]:
        return None
    return (
        f"headless Vibe has no approval relay: with --agent {agent} it denies every tool that needs "
        f"approval, and it asks for every MCP tool, so the Octipus bridge ({bridge.server_name}) is "
        "configured but its tools will be denied; use the acp transport, or permission mode full"
    )


def build_headless_launch(request: LaunchRequest) -> LaunchSpec:
    """Build the headless launch (see :meth:`octipus_vibe.VibeAdapter.build_launch`).

    Args:
        request: The launch request.

    Returns:
        argv ``/bin/sh -c WRAPPER ...``, stdin ``DEVNULL``, the prompt file.

    Raises:
        AdapterError: see :meth:`octipus_vibe.VibeAdapter.build_launch`.
    """
    mode = permission_mode_of(request)
    resume = _resume_id(request)
    agent = VIBE_MODES[mode]
    turns = _limit(request.turn_limit, DEFAULT_TURN_LIMIT, "turn_limit")
    tokens = _limit(request.token_limit, DEFAULT_TOKEN_LIMIT, "token_limit")
    prompt_path = request.run_dir / PROMPT_FILE_NAME
    out_dir = request.run_dir / OUTPUT_DIR_NAME
    extra: dict[str, str] = {}
    secrets: tuple[str, ...] = ()
    if request.bridge is not None:
        check_bridge(request.bridge)
        extra[MCP_SERVERS_ENV] = headless_mcp_servers(request.bridge)
        secrets = (request.bridge.token,)
    header = HeadlessHeader(
        bridge=request.bridge.server_name if request.bridge is not None else None,
        agent=agent,
        turn_limit=turns,
        token_limit=tokens,
        notice=headless_notice(request.bridge, agent),
    )
    vibe = [
        sibling_binary(request.binary, HEADLESS_BINARY_NAME),
        "--prompt-file",
        str(prompt_path),
        "--output",
        "streaming",
        "--agent",
        agent,
        "--max-turns",
        str(turns),
        "--max-tokens",
        str(tokens),
        "--workdir",
        str(request.cwd),
        "--output-dir",
        str(out_dir),
    ]
    if resume is not None:
        vibe.append(f"--resume={resume}")
    argv = (SHELL, "-c", WRAPPER, WRAPPER_NAME, header.to_line(), str(out_dir), *vibe)
    if any("\x00" in a for a in argv):
        raise AdapterError("a command-line value contains a NUL character")
    return LaunchSpec(
        argv=argv,
        env=child_env(request, extra),
        cwd=request.cwd,
        files={prompt_path: compose_prompt(request.prompt, request.system_prompt)},
        stdin_mode=StdinMode.DEVNULL,
        initial_input=(),
        secrets=secrets,
    )


#: Why a Vibe run in a shared space is refused (seed 003 "In shared spaces": "Mistral Vibe declares
#: no such mode and is refused in spaces"; FACTS.md §5 "Vibe is refused").
SPACE_REFUSAL: Final = (
    "Mistral Vibe declares no space mode and is refused in shared spaces; use a Claude Code or Codex "
    "model row with metadata.cliAgent.sharedUse: true"
)


def build_launch(request: LaunchRequest, *, client_version: str) -> LaunchSpec:
    """Build one Vibe invocation for the request's transport.

    Raises:
        AdapterError: :data:`SPACE_REFUSAL` when ``request.space`` (on either transport, before any
            other check); otherwise see :meth:`octipus_vibe.VibeAdapter.build_launch`.
    """
    if request.space:
        raise AdapterError(SPACE_REFUSAL)
    check_additive_flags(request.additive_flags)
    if transport_of(request.options) == TRANSPORT_HEADLESS:
        return build_headless_launch(request)
    return build_acp_launch(request, client_version=client_version)
