"""Building one Codex invocation: ``codex app-server`` (default) or ``codex exec --json``.

Both transports get the same quieting flags (observed.md §0 and §2.1: with ``--disable plugins
--disable remote_plugin`` Codex makes no DNS look-ups; analytics and the update check are off),
the same sandbox per Octipus permission mode, and the run's MCP bridge with its bearer token only
in the child's environment (``bearer_token_env_var``; Codex refuses a literal ``bearer_token``,
observed.md §2.5).

In a shared space (``LaunchRequest.space``) both transports run as ``plan`` does, whatever the row's
mode (seed 003 "In shared spaces": "Codex runs in the read-only sandbox"; FACTS.md §5): sandbox
``read-only`` and, on app-server, approval policy ``never``. ``never`` matters: under ``untrusted`` an
approved command runs outside the sandbox (checked on 0.171.0: ``echo x > out.txt`` approved under
read-only + untrusted wrote the file), so a relayed approval would be a way out of read-only. With
``never`` nothing escalates: a write fails in the sandbox and the model is told. Bridge tools are
still decided by Octipus on the bridge (``default_tools_approval_mode = "approve"``).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from octipusd import adapterkit
from octipusd.adapter import JSON, BridgeEndpoint, LaunchRequest, LaunchSpec, PermissionMode, StdinMode
from octipusd.adapter_launch import BRIDGE_TOKEN_ENV
from octipusd.errors import AdapterError

from . import rpc

#: ``request.options["transport"]`` values.
TRANSPORT_APP_SERVER: Final = "app-server"
TRANSPORT_EXEC: Final = "exec"
TRANSPORTS: Final[tuple[str, ...]] = (TRANSPORT_APP_SERVER, TRANSPORT_EXEC)

#: Flags of every invocation (observed.md §0, §2.1; all accepted by ``codex app-server`` and
#: ``codex exec`` 0.171.0): no plugin or remote-plugin look-ups, no analytics, no update check.
QUIET_FLAGS: Final[tuple[str, ...]] = (
    "--disable",
    "plugins",
    "--disable",
    "remote_plugin",
    "-c",
    "analytics.enabled=false",
    "-c",
    "check_for_update_on_startup=false",
)

#: Codex's own configuration variables passed from the daemon's environment (sources.md §2.1, §2.4):
#: ``CODEX_HOME`` (config, auth, sessions) and the other ``CODEX_*`` switches, and the built-in
#: provider's ``OPENAI_BASE_URL``. A custom provider's ``env_key`` is the operator's own name:
#: the row lists it in ``metadata.cliAgent.passEnv``.
CONFIG_ENV: Final[frozenset[str]] = frozenset({"CODEX_*", "OPENAI_BASE_URL"})
#: OpenAI's and Codex's API-key variables (sources.md §2.1, §2.4), passed only with ``inheritApiKeys``.
API_KEY_ENV: Final[frozenset[str]] = frozenset({"OPENAI_API_KEY", "CODEX_API_KEY"})

#: Octipus permission mode -> Codex sandbox mode (seed 003 "Permissions and limits"; values of
#: ``SandboxMode`` in the generated schema and of ``codex exec --sandbox``).
SANDBOX_MODES: Final[Mapping[PermissionMode, str]] = {
    PermissionMode.WORKSPACE: "workspace-write",
    PermissionMode.FULL: "danger-full-access",
    PermissionMode.PLAN: "read-only",
    PermissionMode.DEFAULT: "read-only",
}

#: Octipus permission mode -> app-server ``approvalPolicy`` (observed-2.md §1.3: ``untrusted``
#: asks for every command, ``never`` never asks; ``exec`` always runs with ``never``).
#: ``workspace`` and ``default`` relay every command to Octipus (an approved command then runs even
#: where the read-only sandbox would refuse it: checked on 0.171.0, ``echo x > out.txt`` approved
#: under read-only + untrusted wrote the file); ``full`` and ``plan`` never ask (``plan`` stays
#: read-only: a write fails in the sandbox and the model is told).
APPROVAL_POLICIES: Final[Mapping[PermissionMode, str]] = {
    PermissionMode.WORKSPACE: "untrusted",
    PermissionMode.FULL: "never",
    PermissionMode.PLAN: "never",
    PermissionMode.DEFAULT: "untrusted",
}

#: Values ``--color`` accepts (``codex exec --help``).
COLOR_VALUES: Final[tuple[str, ...]] = ("always", "never", "auto")

_ADDITIVE_SWITCHES: Final[tuple[str, ...]] = ("--strict-config",)
_COLOR_FLAG: Final = adapterkit.ValuedFlag("--color", COLOR_VALUES, noun="value", kind="colour values")

#: Human-readable list of the allowed additive flags (seed 003 "Permissions and limits").
ALLOWED_ADDITIVE_FLAGS: Final[tuple[str, ...]] = adapterkit.allowed_additive_flags(
    _ADDITIVE_SWITCHES, _COLOR_FLAG
)

#: Codex's setting of whether its shell tool starts login shells (``bash -lc``), turned off for a run
#: with a bridge (:func:`bridge_config`): a login shell re-reads ``/etc/profile``, which on Debian
#: and Ubuntu sets ``PATH`` afresh, so the bridge helper's folder the runtime appended to the launch's
#: ``PATH`` was lost and ``octipus-bridge`` was "command not found" (checked on 0.171.0). The launch's
#: ``PATH`` already is the login shell's (``octipusd.runner.executables.login_path``), so commands
#: keep the user's tools; what a login shell adds besides ``PATH`` (a profile's other exports) is not
#: read.
LOGIN_SHELL_KEY: Final = "allow_login_shell"

#: Above this many UTF-8 bytes a value cannot go on exec's command line (one argv entry is limited
#: to 128 KiB on Linux); the app-server transport sends it over stdin instead and has no limit.
EXEC_INLINE_MAX_BYTES: Final = 96 * 1024


def normalize_additive_flags(flags: Sequence[str]) -> tuple[str, ...]:
    """Validate a model row's additive flags and return them as ``--strict-config`` / ``--color=<v>``.

    Accepted (seed 003): ``--strict-config`` (fail on unknown config.toml fields; accepted by
    ``codex exec`` and ``codex app-server`` 0.171.0) and ``--color <always|never|auto>`` (also as
    ``--color=<v>``; only ``codex exec`` has it, so the app-server transport drops it: JSON-RPC
    output has no colour). Duplicates are kept once.

    Args:
        flags: The row's additive flags, in order.

    Returns:
        The normalized flags, in first-seen order.

    Raises:
        AdapterError: a flag is not allowed, ``--color`` has a missing or unknown value, or two
            different colour values are given; the message names the flag and the allowed list.
    """
    return adapterkit.normalize_additive_flags(
        flags, vendor="Codex CLI", switches=_ADDITIVE_SWITCHES, valued=_COLOR_FLAG, type_vendor="Codex"
    )


def toml_value(value: str | bool | float) -> str:
    """A TOML value for ``-c key=value``: a basic string, ``true``/``false`` or a (finite) float."""
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(float(value))


def toml_string(value: str) -> str:
    """Encode ``value`` as a TOML basic string (for ``-c key=<TOML value>``).

    ``codex -c`` parses the value as TOML and falls back to the raw text when that fails
    (``codex --help``), so values are always given as valid TOML strings: backslash, quote and
    every control character (U+0000-U+001F, U+007F) are escaped; other characters stay literal.

    Args:
        value: Any text (lone surrogates are replaced with U+FFFD).

    Returns:
        The quoted string, e.g. ``"a\\"b"``.
    """
    text = value.encode("utf-8", "replace").decode("utf-8") if _has_surrogates(value) else value
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _has_surrogates(value: str) -> bool:
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)


def _check_mode(value: str) -> PermissionMode:
    try:
        return PermissionMode(value)
    except ValueError:
        raise AdapterError(
            f"unknown permission mode {value!r}; expected one of {', '.join(m.value for m in PermissionMode)}"
        ) from None


def effective_mode(request: LaunchRequest) -> PermissionMode:
    """Return the permission mode the launch uses: the row's, or ``plan`` in a shared space.

    ``plan`` maps to the ``read-only`` sandbox with approval policy ``never`` (module docstring):
    Codex's declared space mode.

    Raises:
        AdapterError: the row's mode is unknown (checked in a space too).
    """
    mode = _check_mode(request.permission_mode)
    return PermissionMode.PLAN if request.space else mode


def transport_of(options: Mapping[str, Any]) -> str:
    """Return the transport chosen by ``options["transport"]`` (default ``app-server``).

    Raises:
        AdapterError: an unknown transport (the message lists the known ones).
    """
    value = options.get("transport", TRANSPORT_APP_SERVER)
    if value is None:
        return TRANSPORT_APP_SERVER
    if value not in TRANSPORTS:
        raise AdapterError(
            f"unknown Codex transport {value!r} in the model's cliAgent options; expected one of "
            f"{', '.join(TRANSPORTS)}"
        )
    return str(value)


def check_bridge(bridge: BridgeEndpoint) -> None:
    """Validate the bridge endpoint for Codex's MCP configuration.

    Raises:
        AdapterError: the URL is not http(s), the server name is not ASCII letters, digits, ``-`` or
            ``_`` (Codex shows its tools as the namespace ``mcp__<name>``, observed.md §2.5), or the
            token is empty or not header-safe. Messages never include the token.
    """
    if not bridge.url.startswith(("http://", "https://")):
        raise AdapterError(f"bridge URL {bridge.url!r} is not an http(s) URL")
    name = bridge.server_name
    if not name or not all(c.isascii() and (c.isalnum() or c in "-_") for c in name):
        raise AdapterError(f"bridge server name {name!r} must be non-empty ASCII letters, digits, '-' or '_'")
    token = bridge.token
    if not token or not all(c.isascii() and c.isprintable() and not c.isspace() for c in token):
        raise AdapterError("bridge token must be a non-empty printable ASCII string without spaces")


def bridge_server_config(bridge: BridgeEndpoint) -> JSON:
    """The ``mcp_servers.<name>`` table for the bridge (observed.md §2.5, observed-2.md §1.4).

    ``{"url": <url>, "bearer_token_env_var": "OCTIPUS_BRIDGE_TOKEN", "required": true,
    "default_tools_approval_mode": "approve", "tool_timeout_sec": <seconds>}``:

    * the token travels in the child's environment only (Codex sends ``Authorization: Bearer``), in
      the adapter protocol's :data:`~octipusd.adapter_launch.BRIDGE_TOKEN_ENV`, which the runtime sets on
      every launch with a bridge (:func:`~octipusd.adapter_launch.with_bridge_helper`);
    * ``required`` makes a bridge that cannot start fail the thread at once (exec: rc 1 with
      ``required MCP servers failed to initialize``; app-server: the ``thread/start`` error says the
      same), instead of a run silently without Octipus tools;
    * ``approve``: Octipus already decides every bridge call on the bridge itself (seed 003 "All
      Octipus tool calls use Octipus permissions"); without it exec fails the call ("requires
      approval, but approval policy is never") and app-server asks through an MCP elicitation;
    * ``tool_timeout_sec``: Codex cuts a tool call after its own 60 s otherwise; the bridge's
      :attr:`~octipusd.adapter.BridgeEndpoint.tool_timeout_seconds` lets an approval wait, a
      ``collect_children`` or a long ``shell__run`` reach the bridge's two-hour limit (seed 003).

    Raises:
        AdapterError: the tool timeout is not a positive finite number of seconds.
    """
    timeout = bridge.tool_timeout_seconds
    if not (math.isfinite(timeout) and timeout > 0):
        raise AdapterError(f"bridge tool timeout must be a positive number of seconds, got {timeout!r}")
    return {
        "url": bridge.url,
        "bearer_token_env_var": BRIDGE_TOKEN_ENV,
        "required": True,
        "default_tools_approval_mode": "approve",
        "tool_timeout_sec": float(timeout),
    }


def _check_text(name: str, value: str) -> str:
    if "\x00" in value:
        raise AdapterError(f"{name} contains a NUL character, which cannot be passed to Codex")
    return value


def _resume_id(request: LaunchRequest) -> str | None:
    if not request.resume:
        return None
    if not request.vendor_session_id:
        raise AdapterError(
            "codex needs the stored thread id to resume; none was given (Codex assigns the id, Octipus "
            "saves it from the SessionEvent of the first turn)"
        )
    return request.vendor_session_id


def exec_argv(request: LaunchRequest, extra: Sequence[str]) -> list[str]:
    """Build the ``codex exec --json`` argv (observed.md §2.1, §2.4-§2.6).

    ::

        <binary> exec --json --skip-git-repo-check --disable plugins --disable remote_plugin
            -c analytics.enabled=false -c check_for_update_on_startup=false
            --sandbox=<read-only|workspace-write|danger-full-access>
            [--model=<model>]
            [-c mcp_servers.<name>.url="<url>" -c mcp_servers.<name>.bearer_token_env_var="OCTIPUS_BRIDGE_TOKEN"
             -c mcp_servers.<name>.required=true -c mcp_servers.<name>.default_tools_approval_mode="approve"
             -c allow_login_shell=false]
            [-c developer_instructions="<system prompt>"]
            [--strict-config] [--color=<v>]
            [resume <thread uuid>] -- <prompt>

    ``--`` keeps a prompt that starts with ``-`` from being read as a flag (checked on 0.171.0
    with and without ``resume``). A resume id must be a UUID: Codex treats any other text as a
    thread *name* and silently starts a new thread when none matches (observed.md §2.6).

    Raises:
        AdapterError: a non-UUID resume id, or a prompt/system prompt too long for argv (use the
            app-server transport) or containing NUL.
    """
    mode = effective_mode(request)
    argv = [request.binary, "exec", "--json", "--skip-git-repo-check", *QUIET_FLAGS]
    argv.append(f"--sandbox={SANDBOX_MODES[mode]}")
    if request.model:
        argv.append(f"--model={_check_text('model name', request.model)}")
    if request.bridge is not None:
        name = request.bridge.server_name
        for key, value in bridge_server_config(request.bridge).items():
            encoded = toml_value(value)
            argv += ["-c", f"mcp_servers.{name}.{key}={encoded}"]
        argv += ["-c", f"{LOGIN_SHELL_KEY}=false"]
    if request.system_prompt:
        encoded = toml_string(_check_text("system prompt", request.system_prompt))
        if len(encoded.encode()) > EXEC_INLINE_MAX_BYTES:
            raise AdapterError(
                "the system prompt is too long for a codex exec command line; use the app-server transport "
                "(the default) for this model"
            )
        argv += ["-c", f"developer_instructions={encoded}"]
    argv += list(extra)
    resume = _resume_id(request)
    if resume is not None:
        try:
            uuid.UUID(resume)
        except ValueError:
            raise AdapterError(
                f"codex thread id {resume!r} is not a UUID; codex exec would treat it as a thread name and "
                "silently start a new thread (observed.md §2.6)"
            ) from None
        argv += ["resume", resume]
    prompt = _check_text("prompt", request.prompt)
    if len(prompt.encode("utf-8", "surrogatepass")) > EXEC_INLINE_MAX_BYTES:
        raise AdapterError(
            "the prompt is too long for a codex exec command line; use the app-server transport (the default)"
        )
    argv += ["--", prompt]
    return argv


def app_server_plan(request: LaunchRequest) -> rpc.Plan:
    """Build the JSON-RPC plan of one app-server run (observed-2.md §1.2, §1.4, §1.5).

    ``thread/start`` (or ``thread/resume`` with ``threadId``) params::

        {"cwd": <cwd>, "approvalPolicy": <untrusted|never>, "approvalsReviewer": "user",
         "sandbox": <read-only|workspace-write|danger-full-access>,
         "config": {"mcp_servers": {<bridge>: {url, bearer_token_env_var, required,
                                               default_tools_approval_mode}},
                    "allow_login_shell": false},
         ["model": <model>], ["developerInstructions": <system prompt>]}
        (+ "threadId": <id>, "excludeTurns": true on a resume)

    They are sent again in full on a resume: ``thread/resume`` keeps neither the sandbox nor the
    per-thread MCP configuration (observed-2.md §1.5). ``approvalsReviewer: "user"`` keeps a
    user-level ``approvals_reviewer`` setting from routing approvals away from Octipus.
    ``turn/start`` params: ``{"input": [{"type": "text", "text": <prompt>, "text_elements": []}]}``.
    In a shared space the sandbox is ``read-only`` and the approval policy ``never``
    (:func:`effective_mode`).
    """
    mode = effective_mode(request)
    params: JSON = {
        "cwd": str(request.cwd),
        "approvalPolicy": APPROVAL_POLICIES[mode],
        "approvalsReviewer": "user",
        "sandbox": SANDBOX_MODES[mode],
    }
    if request.bridge is not None:
        params["config"] = {
            "mcp_servers": {request.bridge.server_name: bridge_server_config(request.bridge)},
            LOGIN_SHELL_KEY: False,
        }
    if request.model:
        params["model"] = _check_text("model name", request.model)
    if request.system_prompt:
        params["developerInstructions"] = request.system_prompt
    resume = _resume_id(request)
    if resume is not None:
        # excludeTurns: the answer need not carry the old turns (full-history hydration is
        # deprecated, a ``deprecationNotice`` says so otherwise); the model still gets them all.
        params = {"threadId": resume, **params, "excludeTurns": True}
    turn: JSON = {"input": [{"type": "text", "text": request.prompt, "text_elements": []}]}
    return rpc.Plan(
        thread_method="thread/resume" if resume is not None else "thread/start",
        thread_params=params,
        turn_params=turn,
        bridge=request.bridge.server_name if request.bridge is not None else None,
        resume=resume,
    )


def app_server_initial_input(request: LaunchRequest, version: str) -> tuple[str, ...]:
    """The first stdin lines of an app-server run: ``initialize``, ``initialized``, ``config/read``.

    They are pipelined (the pinned binary answers them in order). The ``config/read`` answer (for
    the run's cwd, so project layers count) lists the user's MCP servers, which the parser's thread
    request then switches off (:func:`octipus_codex.rpc.thread_request`). Building the plan here
    also validates what the parser will send (:func:`app_server_plan`).
    """
    app_server_plan(request)
    return (
        rpc.initialize_request(version),
        rpc.notification("initialized"),
        rpc.request(rpc.CONFIG_READ_ID, "config/read", {"cwd": str(request.cwd)}),
    )


def build_launch(request: LaunchRequest, *, version: str) -> LaunchSpec:
    """Build one Codex invocation (see :meth:`octipus_codex.CodexAdapter.build_launch`).

    Raises:
        AdapterError: unknown transport or permission mode, a disallowed additive flag, an invalid
            bridge, a missing resume id, and the exec-only limits of :func:`exec_argv`.
    """
    transport = transport_of(request.options)
    extra = normalize_additive_flags(request.additive_flags)
    if request.bridge is not None:
        check_bridge(request.bridge)
    secrets = (request.bridge.token,) if request.bridge is not None else ()
    if transport == TRANSPORT_EXEC:
        return LaunchSpec(
            argv=tuple(exec_argv(request, extra)),
            env=request.env,
            cwd=request.cwd,
            stdin_mode=StdinMode.DEVNULL,
            secrets=secrets,
        )
    flags = [f for f in extra if not f.startswith("--color")]
    return LaunchSpec(
        argv=(request.binary, "app-server", *QUIET_FLAGS, *flags),
        env=request.env,
        cwd=request.cwd,
        stdin_mode=StdinMode.STREAM,
        initial_input=app_server_initial_input(request, version),
        secrets=secrets,
    )
