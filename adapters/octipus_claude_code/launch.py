"""Building one Claude Code invocation: argv, environment, files and the first stdin line.

Every value-carrying flag is passed as a single ``--flag=value`` token. Claude Code's option
parser binds the text after ``=`` to the flag whatever it looks like, so a value starting with
``-`` can never be read as another flag (the reason the official SDK passes ``--resume=ID`` and
``--session-id=UUID`` this way, sources.md §1.1). Each ``=`` form used here was checked against
the real 2.1.197 binary (see the package docstring).

Space mode (``LaunchRequest.space``; seed 003 "In shared spaces", FACTS.md §5 "CLI models in a
space"): native tools must not act outside Octipus's decision path, so a run in a shared space gets

* ``--permission-mode=default`` whatever the row's mode, except that ``plan`` stays ``plan`` (it is
  stricter: no edits or commands at all, and bypass cannot make it lax since bypass is disabled);
* the stdio permission relay (``--permission-prompt-tool stdio``, in :data:`BASE_FLAGS` anyway);
* no pre-approved tools: the adapter passes no ``--allowedTools`` in any mode (the bridge's MCP
  tools too are decided by Octipus through the relay), and no settings file's allow rules load;
* ``--setting-sources=`` (empty: no user, project or local settings file is read; the official SDK
  passes ``setting_sources=[]`` this way, sources.md §1.1);
* ``--settings=<run_dir>/claude-space-settings.json``: the locked flag-settings layer
  (:func:`space_settings`), written 0600 through ``LaunchSpec.files``.

Native denials (``LaunchRequest.denied_native``, in a space or not): Octipus's DENY rules for
native tools go to Claude's own deny list as ``--disallowedTools=<rule>`` tokens (one per rule,
after ``--permission-mode`` and the settings flags), since Claude approves reads, and in
``acceptEdits`` edits and common filesystem commands, without relaying them; its deny rules hold
before any of its approvals. :mod:`.denials` translates them and names the ones that cannot be
passed exactly; those are reported in ``LaunchSpec.notices`` (the relay still applies them).

Observed with claude 2.1.197 (tests/unit/adapters/test_claude_code_space_real_binary.py): with a
workspace ``.claude/settings.json`` and a user ``settings.json`` both allowing ``Bash`` and ``Write``,
setting ``defaultMode: bypassPermissions`` and adding a ``PreToolUse`` hook, a space run still sent
a ``can_use_tool`` request for ``Bash``, never ran the planted hook, and ran only the shell guard.
Without ``--setting-sources=`` the same user allow rule ran the command with no request at all.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from octipusd import adapterkit
from octipusd.adapter import BridgeEndpoint, LaunchRequest, LaunchSpec, PermissionMode, StdinMode
from octipusd.errors import AdapterError

from .denials import translate_denials

#: The fixed head of every invocation (observed.md §1.1, §1.4, §1.6(b)): print mode, stream-json
#: in and out (``--verbose`` is mandatory with stream-json output), each stdin user message echoed
#: back with ``isReplay: true`` once Claude takes it (the acknowledgement of steering, seed 003;
#: Claude 2.1.197 replays it when it starts the turn, or in the middle of a turn when it merges it
#: into the request after a tool result), and the stdio permission relay (without it no
#: ``can_use_tool`` request is ever emitted and tools are silently denied).
BASE_FLAGS: Final[tuple[str, ...]] = (
    "-p",
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--verbose",
    "--replay-user-messages",
    "--permission-prompt-tool",
    "stdio",
)

#: Octipus permission mode -> Claude ``--permission-mode`` value (seed 003 "Permissions and
#: limits"; the accepted choices are listed by ``claude --help``: acceptEdits, auto,
#: bypassPermissions, default, dontAsk, plan).
PERMISSION_MODES: Final[Mapping[PermissionMode, str]] = {
    PermissionMode.WORKSPACE: "acceptEdits",
    PermissionMode.FULL: "bypassPermissions",
    PermissionMode.PLAN: "plan",
    PermissionMode.DEFAULT: "default",
}

#: Variables that stop every request except the model's own (observed.md §1.1; with them strace
#: saw Claude reach only the base URL). Set on top of the request's environment.
QUIET_ENV: Final[Mapping[str, str]] = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
}

#: Claude's limit (ms) on an http MCP server's tool call that sends neither its response nor a
#: progress notification, checked every 30 s; 300000 by default on 2.1.197 (its binary:
#: ``CLAUDE_CODE_MCP_TOOL_IDLE_TIMEOUT ?? 300000``, capped by the server's ``timeout``).
IDLE_TIMEOUT_ENV: Final = "CLAUDE_CODE_MCP_TOOL_IDLE_TIMEOUT"

#: Claude Code's own configuration variables passed from the daemon's environment (sources.md
#: §1.10, CCDOCS ``env-vars``): ``CLAUDE_CONFIG_DIR``, every ``CLAUDE_CODE_*`` switch (the OAuth
#: login ``CLAUDE_CODE_OAUTH_TOKEN`` included: it is Claude's stored login, not an API key;
#: ``CLAUDE_CODE_MAX_RETRIES``, ``CLAUDE_CODE_USE_BEDROCK``...), the endpoint and model choices,
#: the ``DISABLE_*`` switches and the MCP / Bash / thinking limits. ``CLAUDECODE`` does not match.
CONFIG_ENV: Final[frozenset[str]] = frozenset(
    {
        "CLAUDE_*",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
        "ANTHROPIC_DEFAULT_*",
        "ANTHROPIC_SMALL_FAST_MODEL*",
        "ANTHROPIC_BEDROCK_BASE_URL",
        "ANTHROPIC_VERTEX_*",
        "DISABLE_*",
        "MCP_TIMEOUT",
        "MCP_TOOL_TIMEOUT",
        "MAX_MCP_OUTPUT_TOKENS",
        "MAX_THINKING_TOKENS",
        "BASH_DEFAULT_TIMEOUT_MS",
        "BASH_MAX_TIMEOUT_MS",
        "BASH_MAX_OUTPUT_LENGTH",
        "USE_BUILTIN_RIPGREP",
    }
)

#: Anthropic's API-key variables (sources.md §1.10), passed only with ``inheritApiKeys``.
API_KEY_ENV: Final[frozenset[str]] = frozenset({"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"})

#: Variables removed from the child's environment: ``CLAUDECODE`` makes a nested CLI believe it
#: runs inside Claude Code (the SDK strips it, sources.md §1.1).
STRIPPED_ENV: Final[frozenset[str]] = frozenset({"CLAUDECODE"})

#: Boolean additive flags a model row may add (seed 003 "Permissions and limits").
ADDITIVE_SWITCHES: Final[tuple[str, ...]] = (
    "--no-session-persistence",
    "--no-chrome",
    "--disable-slash-commands",
)

#: Values ``--effort`` accepts in 2.1.197 (``claude --help``: "low, medium, high, xhigh, max"; an
#: unknown value is only warned about and ignored by the binary, so Octipus rejects it instead).
EFFORT_LEVELS: Final[tuple[str, ...]] = ("low", "medium", "high", "xhigh", "max")

_EFFORT_FLAG: Final = adapterkit.ValuedFlag("--effort", EFFORT_LEVELS, noun="level", kind="effort levels")

#: Human-readable list of the allowed additive flags, used in error messages.
ALLOWED_ADDITIVE_FLAGS: Final[tuple[str, ...]] = adapterkit.allowed_additive_flags(
    ADDITIVE_SWITCHES, _EFFORT_FLAG
)

#: File names written into the run directory.
MCP_CONFIG_NAME: Final = "claude-mcp-config.json"
SYSTEM_PROMPT_NAME: Final = "claude-append-system-prompt.txt"
SPACE_SETTINGS_NAME: Final = "claude-space-settings.json"

#: Tools the space-mode shell guard judges, i.e. the native tools that write files (Claude Code tools
#: reference). The same list as ``octipusd.policy.shellguard.GUARDED_TOOLS`` (a test keeps them equal;
#: the adapter does not import the policy package).
SHELL_GUARD_TOOLS: Final[tuple[str, ...]] = ("Bash", "Write", "Edit", "MultiEdit", "NotebookEdit")

#: The hook matcher: Claude hook matchers take tool names separated by ``|`` (hooks reference; the
#: guard ran for ``Bash`` and ``Write`` and not for ``Read`` with claude 2.1.197).
SHELL_GUARD_MATCHER: Final = "|".join(SHELL_GUARD_TOOLS)

#: Seconds Claude waits for the guard (hook ``timeout``, seconds; the guard answers in ~0.2 s).
SHELL_GUARD_TIMEOUT_SECONDS: Final = 30

#: Above this many UTF-8 bytes the appended system prompt goes through
#: ``--append-system-prompt-file`` instead of argv: Linux refuses a single argument over
#: 128 KiB (MAX_ARG_STRLEN, ``E2BIG``). The file flag is hidden from ``--help`` but accepted by
#: 2.1.197 (checked with a 200 KB file; the text reached the model's ``system`` blocks).
INLINE_SYSTEM_PROMPT_MAX_BYTES: Final = 64 * 1024


def _flag(name: str, value: str) -> str:
    if "\x00" in value:
        raise AdapterError(f"{name} value contains a NUL character, which cannot be passed on a command line")
    return f"{name}={value}"


def _check_session_id(value: str | None, *, resume: bool) -> str:
    what = "resume" if resume else "start"
    if not value:
        raise AdapterError(
            f"claude-code needs a vendor session id to {what}: Octipus mints Claude's id before the first "
            "turn (ClaudeCodeAdapter.new_session_id) and passes it with --session-id"
        )
    try:
        uuid.UUID(value)
    except ValueError:
        raise AdapterError(
            f"claude-code vendor session id {value!r} is not a UUID; Claude accepts only UUIDs for "
            "--session-id (observed.md §1.7)"
        ) from None
    return value


def normalize_additive_flags(flags: Sequence[str]) -> tuple[str, ...]:
    """Validate a model row's additive flags and return them in ``--flag[=value]`` form.

    Accepted: ``--no-session-persistence``, ``--no-chrome``, ``--disable-slash-commands`` and
    ``--effort=<low|medium|high|xhigh|max>`` (also given as the two items ``--effort``, ``<level>``).
    Duplicates are kept once. Seed 003 ("Permissions and limits"): managed runs reject any other
    extra argument, since it could override permission, MCP, input, output, directory or budget
    settings.

    Args:
        flags: The row's additive flags, in order.

    Returns:
        The normalized flags, in first-seen order, without duplicates.

    Raises:
        AdapterError: a flag is not allowed, ``--effort`` has a missing or unknown level, or two
            different effort levels are given. The message names the flag and the allowed list.
    """
    return adapterkit.normalize_additive_flags(
        flags, vendor="Claude Code", switches=ADDITIVE_SWITCHES, valued=_EFFORT_FLAG
    )


def mcp_config_json(bridge: BridgeEndpoint) -> str:
    """Return the ``--mcp-config`` file content pointing Claude at the run's bridge.

    Shape (observed.md §1.5, verified: Claude sent ``Authorization: Bearer <token>`` on
    ``initialize``)::

        {"mcpServers": {"<server_name>": {"type": "http", "url": "<url>",
                                          "headers": {"Authorization": "Bearer <token>"},
                                          "timeout": <milliseconds>}}}

    ``timeout`` is Claude's per-server tool-call limit in milliseconds (it overrides
    ``MCP_TOOL_TIMEOUT``; checked on 2.1.197: a call that outlives it fails with ``MCP server
    "octipus" tool "<tool>" timed out after <n>s``), set to the bridge's
    :attr:`~octipusd.adapter.BridgeEndpoint.tool_timeout_seconds` (seed 003: two hours).

    Args:
        bridge: The run's bridge endpoint.

    Returns:
        The JSON text (contains the capability: write it 0600 and never log it).

    Raises:
        AdapterError: the URL is not http(s), the server name is empty or contains characters Claude
            cannot use in ``mcp__<server>__<tool>``, or the token is empty or not header-safe. Messages
            never include the token.
    """
    if not bridge.url.startswith(("http://", "https://")):
        raise AdapterError(f"bridge URL {bridge.url!r} is not an http(s) URL")
    name = bridge.server_name
    if not name or not all(c.isascii() and (c.isalnum() or c in "-_") for c in name):
        raise AdapterError(f"bridge server name {name!r} must be non-empty ASCII letters, digits, '-' or '_'")
    token = bridge.token
    if not token or not all(c.isascii() and c.isprintable() and not c.isspace() for c in token):
        raise AdapterError("bridge token must be a non-empty printable ASCII string without spaces")
    config = {
        "mcpServers": {
            name: {
                "type": "http",
                "url": bridge.url,
                "headers": {"Authorization": f"Bearer {token}"},
                "timeout": tool_timeout_ms(bridge),
            }
        }
    }
    return json.dumps(config, indent=2) + "\n"


def tool_timeout_ms(bridge: BridgeEndpoint) -> int:
    """The bridge's vendor-side tool timeout in whole milliseconds (Claude ignores values < 1000).

    Raises:
        AdapterError: the timeout is not a finite number of seconds of at least one.
    """
    seconds = bridge.tool_timeout_seconds
    if not (math.isfinite(seconds) and seconds >= 1):
        raise AdapterError(f"bridge tool timeout must be at least 1 s, got {seconds!r}")
    return round(seconds * 1000)


def encode_user_message(text: str) -> str:
    """Encode one stream-json user line for Claude's stdin (no trailing newline).

    Shape (observed.md §1.4, sources.md §1.3)::

        {"type":"user","message":{"role":"user","content":<text>},"parent_tool_use_id":null,"session_id":""}

    Args:
        text: The user's text; any characters (JSON escapes keep the line on one line).

    Returns:
        The line, ASCII-only JSON.
    """
    return json.dumps(
        {
            "type": "user",
            "message": {"role": "user", "content": text},
            "parent_tool_use_id": None,
            "session_id": "",
        },
        separators=(",", ":"),
    )


def child_env(base: Mapping[str, str], mode: PermissionMode, *, running_as_root: bool) -> dict[str, str]:
    """Return the child's environment.

    The request's environment, minus :data:`STRIPPED_ENV`, plus :data:`QUIET_ENV` (which wins over
    the request's values). For ``full`` (``bypassPermissions``) when running as root, also
    ``IS_SANDBOX=1``: without it Claude refuses bypass mode as root
    (``--dangerously-skip-permissions cannot be used with root/sudo privileges``, rc=1;
    observed.md §1.9, reproduced on 2.1.197).

    Args:
        base: The runtime's (already filtered) environment for the child.
        mode: The run's Octipus permission mode.
        running_as_root: Whether the child will run with effective uid 0.

    Returns:
        A new dict.
    """
    env = {k: v for k, v in base.items() if k not in STRIPPED_ENV}
    env.update(QUIET_ENV)
    if mode is PermissionMode.FULL and running_as_root:
        env["IS_SANDBOX"] = "1"
    return env


def space_settings(guard_command: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Return the locked flag-settings object of a space run.

    Key names: CCDOCS (the code.claude.com docs mirror of sources.md) ``settings.md`` "Permission
    settings" (``allow``, ``defaultMode``, ``disableBypassPermissionsMode``: "Set to ``"disable"`` to
    prevent ``bypassPermissions`` mode from being activated") and ``settings-reference.md``
    (``enableAllProjectMcpServers``: "Approve every server in project ``.mcp.json`` files without a
    prompt", ``enabledMcpjsonServers``, ``disableAllHooks``, ``disableAutoMode``); the settings schema
    inside claude 2.1.197 lists ``allow``, ``deny``, ``ask``, ``defaultMode``,
    ``disableBypassPermissionsMode``, ``disableAutoMode`` and ``additionalDirectories`` under
    ``permissions``. Observed with 2.1.197: the file is accepted (no warning), its hook runs with
    ``--setting-sources=`` (the flag layer is not one of the filesystem sources), and it turns a
    ``--permission-mode=bypassPermissions`` flag into ``default``::

        {"permissions": {"allow": [], "defaultMode": "default",
                         "disableBypassPermissionsMode": "disable", "disableAutoMode": "disable"},
         "enableAllProjectMcpServers": false, "enabledMcpjsonServers": [],
         "hooks": {"PreToolUse": [{"matcher": "Bash|Write|Edit|MultiEdit|NotebookEdit",
                                   "hooks": [{"type": "command", "command": <guard_command>,
                                              "timeout": 30}]}]}}

    * no allow rules; ``disableBypassPermissionsMode: "disable"`` ("prevent bypassPermissions mode
      from being activated") and ``disableAutoMode: "disable"`` (auto mode lets a classifier approve
      calls without asking; plan mode uses it too "when auto mode is available", CCDOCS
      ``permission-modes``);
    * no project MCP servers: ``enableAllProjectMcpServers: false`` and an empty
      ``enabledMcpjsonServers`` (``--strict-mcp-config`` already ignores ``.mcp.json``);
    * ``disableAllHooks`` is not set: the shell guard (``octipusd.policy.shellguard``) must run, and
      it is the only hook, since no other settings file is read.

    Args:
        guard_command: The shell command of the guard hook
            (:func:`octipusd.adapterkit.shell_guard_command`).
        extra: More top-level keys for the same layer (the GLM/Kimi endpoint ``env`` and
            ``apiKeyHelper``); the keys above win over them.

    Returns:
        A new JSON-ready dict.
    """
    settings: dict[str, Any] = dict(extra or {})
    settings.update(
        {
            "permissions": {
                "allow": [],
                "defaultMode": "default",
                "disableBypassPermissionsMode": "disable",
                "disableAutoMode": "disable",
            },
            "enableAllProjectMcpServers": False,
            "enabledMcpjsonServers": [],
            "hooks": {
                "PreToolUse": [
                    {
                        "matcher": SHELL_GUARD_MATCHER,
                        "hooks": [
                            {
                                "type": "command",
                                "command": guard_command,
                                "timeout": SHELL_GUARD_TIMEOUT_SECONDS,
                            }
                        ],
                    }
                ]
            },
        }
    )
    return settings


def space_settings_json(guard_command: str, extra: Mapping[str, Any] | None = None) -> str:
    """Return :func:`space_settings` as the text of the ``--settings`` file (JSON, newline-terminated)."""
    return json.dumps(space_settings(guard_command, extra), indent=2) + "\n"


def space_permission_mode(mode: PermissionMode) -> PermissionMode:
    """Return the permission mode a space run uses for the row's ``mode``.

    ``plan`` stays ``plan`` (stricter than ``default``: no edits, no commands); every other mode,
    including ``full`` (bypass) and ``workspace`` (acceptEdits, which would run edits without asking),
    becomes ``default``, where every tool but reads goes through the stdio relay (seed 003 "In shared
    spaces": "--permission-mode default with the stdio permission tool").
    """
    return PermissionMode.PLAN if mode is PermissionMode.PLAN else PermissionMode.DEFAULT


def build_launch(
    request: LaunchRequest,
    *,
    running_as_root: bool,
    guard_command: str | None = None,
    space_extra_settings: Mapping[str, Any] | None = None,
) -> LaunchSpec:
    """Build one Claude Code invocation (see :meth:`ClaudeCodeAdapter.build_launch`).

    Args:
        request: The launch request.
        running_as_root: Whether the child runs with effective uid 0 (decides ``IS_SANDBOX``).
        guard_command: The shell guard hook command; required when ``request.space``.
        space_extra_settings: Keys merged into the locked settings file of a space run (see
            :func:`space_settings`); ignored outside a space.

    Returns:
        The launch spec; ``notices`` holds one sentence when some of ``request.denied_native``
        cannot be passed to Claude exactly (:meth:`.denials.DenialTranslation.notice`).

    Raises:
        AdapterError: missing or non-UUID session id, disallowed additive flag, invalid bridge, a
            NUL character in a value that must go on the command line, or a space run without a
            guard command.
    """
    session_id = _check_session_id(request.vendor_session_id, resume=request.resume)
    try:
        mode = PermissionMode(request.permission_mode)
    except ValueError:
        raise AdapterError(
            f"unknown permission mode {request.permission_mode!r}; expected one of "
            f"{', '.join(m.value for m in PermissionMode)}"
        ) from None
    locked_settings: str | None = None
    if request.space:
        if not guard_command:
            raise AdapterError(
                "claude-code cannot run in a shared space without the shell guard hook command "
                "(octipusd.adapterkit.shell_guard_command)"
            )
        mode = space_permission_mode(mode)
        locked_settings = space_settings_json(guard_command, space_extra_settings)
    extra = normalize_additive_flags(request.additive_flags)
    argv: list[str] = [request.binary, *BASE_FLAGS]
    argv.append(_flag("--resume", session_id) if request.resume else _flag("--session-id", session_id))
    files: dict[Path, str] = {}
    secrets: tuple[str, ...] = ()
    if request.bridge is not None:
        config_path = request.run_dir / MCP_CONFIG_NAME
        files[config_path] = mcp_config_json(request.bridge)
        argv.append(_flag("--mcp-config", str(config_path)))
        secrets = (request.bridge.token,)
    # Always strict: only Octipus's bridge, never a project's .mcp.json or the user's servers.
    argv.append("--strict-mcp-config")
    argv.append(_flag("--permission-mode", PERMISSION_MODES[mode]))
    if locked_settings is not None:
        settings_path = request.run_dir / SPACE_SETTINGS_NAME
        files[settings_path] = locked_settings
        argv.append("--setting-sources=")  # empty: no user, project or local settings file
        argv.append(_flag("--settings", str(settings_path)))
    denials = translate_denials(
        request.denied_native,
        bridge_server=request.bridge.server_name if request.bridge is not None else "octipus",
    )
    argv.extend(denials.argv())
    if request.model:
        argv.append(_flag("--model", request.model))
    if (
        request.turn_limit is not None
    ):  # print mode stops with result subtype error_max_turns (sources.md §1.3)
        argv.append(_flag("--max-turns", str(request.turn_limit)))
    if request.system_prompt:
        text = request.system_prompt
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > INLINE_SYSTEM_PROMPT_MAX_BYTES or "\x00" in text:
            prompt_path = request.run_dir / SYSTEM_PROMPT_NAME
            files[prompt_path] = text
            argv.append(_flag("--append-system-prompt-file", str(prompt_path)))
        else:
            argv.append(_flag("--append-system-prompt", text))
    argv.extend(extra)
    env = child_env(request.env, mode, running_as_root=running_as_root)
    if request.bridge is not None:
        # a bridge call is silent until it answers (an approval or a child can take long): Claude's
        # idle limit on an http server's call (5 min by default) must not end it before its timeout
        env[IDLE_TIMEOUT_ENV] = str(tool_timeout_ms(request.bridge))
    return LaunchSpec(
        argv=tuple(argv),
        env=env,
        cwd=request.cwd,
        files=files,
        stdin_mode=StdinMode.STREAM,
        initial_input=(encode_user_message(request.prompt),),
        secrets=secrets,
        notices=tuple(n for n in (denials.notice(),) if n is not None),
    )
