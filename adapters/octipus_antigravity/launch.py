"""Building one Antigravity (``agy``) print-mode invocation: argv, environment, prompt text.

Facts and their sources (``/work/shared/protocols/sources.md`` §4, seed 003):

* Print mode: ``agy -p "…"`` / ``--prompt`` ("Run a one-shot prompt", official zsh completion);
  agy v1.1.18 was observed (third party) to treat ``--print`` as **variadic**, so the prompt is
  passed as a single ``--print=<text>`` token and placed last.
* Output: the installed build prints the agent's answer as plain text once the turn is over, with
  no conversation id and no JSON (seed 003 "Session reuse", "Permissions and limits": "Buffered
  text"). Octipus therefore never resumes agy: a stale ``--conversation`` id silently starts a
  new conversation (seed 003), so no resume flag is ever passed.
* ``agy`` never reads stdin in print mode; stdin is ``/dev/null`` (``agy -p`` hung in non-TTY
  contexts in 1.0.6, issue #318).
* Modes: ``--mode plan|accept-edits`` (agy >= 1.1); ``plan`` is verified read-only; ``accept-edits``
  without ``--dangerously-skip-permissions`` runs at the configured ``toolPermission``
  (``request-review`` by default), where every tool waits for a review nobody can give in print
  mode and the run ends with an empty answer (observed by a third party). Print-mode writes are
  virtualized under ``~/.gemini/antigravity-cli/brain/<conversation_id>/`` unless the directory is
  granted with ``--add-dir`` (observed). ``--print-timeout`` takes a Go duration (``60s``; a bare
  integer fails with exit 2); the CLI default is 5 minutes. All of these are UNCONFIRMED by the
  vendor (sources.md §6).
* No MCP for Octipus: the agent reaches the run's bridge from its terminal with the
  ``octipus-bridge`` helper; the bridge URL and capability are inherited privately through the
  environment, never on the command line (seed 003 "How tools and context work"), which the runtime
  gives every vendor's launch (:func:`octipusd.adapter_launch.with_bridge_helper`).
* System instructions: print mode has no system-prompt flag, so Octipus's instructions are
  folded into the prompt text (seed 003: "System instructions are passed with the invocation";
  AGENTS.md/GEMINI.md are never rewritten).

Octipus permission mode -> agy arguments:

=============  =====================================================================
``plan``       ``--mode plan`` (read-only planning; also the mode used in shared spaces)
``default``    no ``--mode``: agy's own configured ``toolPermission`` decides (the vendor
               default ``request-review`` lets nothing that needs review run in print mode)
``workspace``  ``--mode accept-edits --add-dir=<cwd>``: edits land in the workspace; other
               tools follow the configured ``toolPermission``
``full``       ``--mode accept-edits --add-dir=<cwd> --dangerously-skip-permissions``
=============  =====================================================================

In a shared space (``LaunchRequest.space``) the run uses ``--mode plan`` whatever the row's mode
(seed 003 "In shared spaces": "Antigravity in --mode plan"; FACTS.md §5): no ``--add-dir=<cwd>``
grant and no ``--dangerously-skip-permissions``.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from octipusd import adapterkit
from octipusd.adapter import BridgeEndpoint, LaunchRequest, LaunchSpec, PermissionMode, StdinMode
from octipusd.adapter_launch import BRIDGE_HELPER_NAME, BRIDGE_TOKEN_ENV, BRIDGE_URL_ENV, bridge_helper_path
from octipusd.errors import AdapterError

#: Environment variables the ``octipus-bridge`` helper reads (the adapter protocol's names).
ENV_BRIDGE_URL: Final = BRIDGE_URL_ENV
ENV_BRIDGE_TOKEN: Final = BRIDGE_TOKEN_ENV

#: Command name of the terminal helper (``[project.scripts]`` in pyproject.toml).
HELPER_NAME: Final = BRIDGE_HELPER_NAME

#: The prompt flag, in ``--print=<text>`` form (sources.md §4: variadic, equals form).
PRINT_FLAG: Final = "--print"

#: Octipus permission mode -> agy arguments placed before the prompt (see the module docstring).
#: ``--add-dir=<cwd>`` is added by :func:`build_launch` for the modes marked in
#: :data:`GRANTS_WORKSPACE`.
PERMISSION_ARGS: Final[Mapping[PermissionMode, tuple[str, ...]]] = {
    PermissionMode.PLAN: ("--mode", "plan"),
    PermissionMode.DEFAULT: (),
    PermissionMode.WORKSPACE: ("--mode", "accept-edits"),
    PermissionMode.FULL: ("--mode", "accept-edits", "--dangerously-skip-permissions"),
}

#: Modes whose writes must reach the real workspace (else agy virtualizes them, sources.md §4).
GRANTS_WORKSPACE: Final[frozenset[PermissionMode]] = frozenset(
    {PermissionMode.WORKSPACE, PermissionMode.FULL}
)

#: Boolean additive flags a model row may add (seed 003 "Permissions and limits").
ADDITIVE_SWITCHES: Final[tuple[str, ...]] = ("--disable-slash-commands",)

#: Values of ``--effort`` (sources.md §4: ``--effort low|medium|high``, third-party observed).
EFFORT_LEVELS: Final[tuple[str, ...]] = ("low", "medium", "high")

_EFFORT_FLAG: Final = adapterkit.ValuedFlag("--effort", EFFORT_LEVELS, noun="level", kind="effort levels")

#: Human-readable list of the allowed additive flags, used in error messages.
ALLOWED_ADDITIVE_FLAGS: Final[tuple[str, ...]] = adapterkit.allowed_additive_flags(
    ADDITIVE_SWITCHES, _EFFORT_FLAG
)

#: Antigravity's own configuration variables passed from the daemon's environment: its ``AGY_*``
#: switches (AGY ``CHANGELOG.md``) and the Gemini endpoint and switches it shares with Gemini CLI
#: (``GOOGLE_GEMINI_BASE_URL``, ``GEMINI_*``; observed-2.md §2.1).
CONFIG_ENV: Final[frozenset[str]] = frozenset({"AGY_*", "GOOGLE_GEMINI_BASE_URL", "GEMINI_*"})
#: Google's API-key variables (observed-2.md §2.1), passed only with ``inheritApiKeys``.
API_KEY_ENV: Final[frozenset[str]] = frozenset({"GEMINI_API_KEY", "GOOGLE_API_KEY"})

#: Variables set on top of the request's environment: no LaTeX rendering and no account header
#: in the printed text (AGY ``CHANGELOG.md`` 1.0.4 / 1.0.2), no colour codes (``NO_COLOR``).
QUIET_ENV: Final[Mapping[str, str]] = {
    "AGY_CLI_DISABLE_LATEX": "1",
    "AGY_CLI_HIDE_ACCOUNT_INFO": "1",
    "NO_COLOR": "1",
}

#: Default ``--print-timeout`` in seconds: two hours, the vendor wall-clock bound seed 003 gives
#: bridge tool requests. agy's own default (5 minutes, sources.md §4) would cut long turns short.
#: The model row option ``printTimeoutSeconds`` overrides it; 0 leaves the flag out.
DEFAULT_PRINT_TIMEOUT_SECONDS: Final = 7200
#: Largest accepted ``printTimeoutSeconds`` (7 days, the daemon's own run timeout bound).
MAX_PRINT_TIMEOUT_SECONDS: Final = 7 * 24 * 3600

#: Above this many UTF-8 bytes the composed prompt is written to :data:`PROMPT_FILE_NAME` in the run
#: directory and argv carries a short pointer to it: Linux refuses a single argument over 128 KiB
#: (MAX_ARG_STRLEN, ``E2BIG``). A prompt with a NUL character goes to the file too.
INLINE_PROMPT_MAX_BYTES: Final = 100 * 1024
PROMPT_FILE_NAME: Final = "agy-prompt.md"


def default_helper() -> str:
    """Return the ``octipus-bridge`` path next to the running interpreter.

    The shared :func:`octipusd.adapterkit.bridge_helper_path` (also used by the Claude adapters for
    the space-mode shell guard hook). No file-system access.

    Returns:
        An absolute path string (``<dirname(sys.executable)>/octipus-bridge``).
    """
    return bridge_helper_path()


def normalize_additive_flags(flags: Sequence[str]) -> tuple[str, ...]:
    """Validate a model row's additive flags and return them in ``--flag[=value]`` form.

    Accepted (seed 003 "Permissions and limits": Antigravity's ``--disable-slash-commands`` and
    ``--effort``): ``--disable-slash-commands`` and ``--effort=<low|medium|high>`` (also given as
    the two items ``--effort``, ``<level>``). Duplicates are kept once.

    Args:
        flags: The row's additive flags, in order.

    Returns:
        The normalized flags in first-seen order.

    Raises:
        AdapterError: a flag is not allowed (the message names it and the allowed list), ``--effort``
            has a missing or unknown level, or two different levels are given.
    """
    return adapterkit.normalize_additive_flags(
        flags,
        vendor="Antigravity",
        switches=ADDITIVE_SWITCHES,
        valued=_EFFORT_FLAG,
        type_vendor="Antigravity",
        values_vendor="Antigravity",
    )


def print_timeout_seconds(options: Mapping[str, Any]) -> int:
    """Read the ``printTimeoutSeconds`` option of the model row.

    Args:
        options: The row's ``metadata.cliAgent`` object.

    Returns:
        Seconds for ``--print-timeout`` (:data:`DEFAULT_PRINT_TIMEOUT_SECONDS` when absent); 0 means
        "do not pass the flag" (agy's own 5-minute default applies).

    Raises:
        AdapterError: the value is not an integer from 0 to :data:`MAX_PRINT_TIMEOUT_SECONDS`.
    """
    value = options.get("printTimeoutSeconds", DEFAULT_PRINT_TIMEOUT_SECONDS)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_PRINT_TIMEOUT_SECONDS:
        raise AdapterError(
            f"metadata.cliAgent.printTimeoutSeconds must be a whole number of seconds from 0 to "
            f"{MAX_PRINT_TIMEOUT_SECONDS} (0 leaves agy's own 5-minute default), got {value!r}"
        )
    return value


def check_bridge(bridge: BridgeEndpoint) -> None:
    """Check that a bridge endpoint can be handed to ``octipus-bridge`` through the environment.

    Args:
        bridge: The run's bridge endpoint.

    Raises:
        AdapterError: the URL is not http(s) or the token is empty or not a printable ASCII string
            without spaces. Messages never include the token.
    """
    if not bridge.url.startswith(("http://", "https://")) or "\x00" in bridge.url:
        raise AdapterError(f"bridge URL {bridge.url!r} is not an http(s) URL")
    token = bridge.token
    if not token or not all(c.isascii() and c.isprintable() and not c.isspace() for c in token):
        raise AdapterError("bridge token must be a non-empty printable ASCII string without spaces")


def bridge_guide(helper: str) -> str:
    """Return the instructions telling the agent how to call Octipus tools from its terminal.

    Args:
        helper: Absolute path of ``octipus-bridge`` (also on the agent's PATH by name).

    Returns:
        Markdown text (no capability: the helper reads it from the environment).
    """
    cmd = shlex.quote(helper)
    return (
        "## Octipus tools\n"
        "This run's Octipus tools (work plan, shell with vault credentials, delegation, ...) are reached "
        "from your terminal with the `octipus-bridge` helper; there is no MCP server for them. Run:\n"
        f"- `{cmd} list` to list the tools with their descriptions "
        "(`--json` adds each tool's input schema);\n"
        f'- `{cmd} call TOOL \'{{"json": "arguments"}}\'` to call TOOL with a JSON object of '
        "arguments (single-quote the JSON for the shell);\n"
        f"- `echo '{{...}}' | {cmd} call TOOL -` to pass large or awkwardly quoted arguments on stdin.\n"
        "The tool's result is printed on stdout. Exit codes: 0 ok, 1 the tool reported an error, "
        "2 bad usage or invalid JSON, 3 the bridge is unreachable (the run has ended).\n"
        "The helper finds this run's private credentials in its environment: never print, copy or "
        f"pass on the {ENV_BRIDGE_URL} or {ENV_BRIDGE_TOKEN} variables. Octipus permissions apply to "
        "every call; if a call is denied, report it and do not work around the denial.\n"
    )


def compose_prompt(request: LaunchRequest, helper: str) -> str:
    """Return the whole text handed to agy: Octipus's instructions, the bridge guide, the task.

    Layout (each part only when present)::

        # Instructions from Octipus
        <request.system_prompt>

        <bridge guide, when the run has a bridge>

        # Task
        <request.prompt>

    With neither instructions nor a bridge, the prompt is passed unchanged.

    Args:
        request: The launch request.
        helper: Absolute path of ``octipus-bridge``.

    Returns:
        The prompt text (characters; its length is the input of the usage estimate).
    """
    sections: list[str] = []
    if request.system_prompt:
        sections.append("# Instructions from Octipus\n" + request.system_prompt.strip("\n") + "\n")
    if request.bridge is not None:
        sections.append(bridge_guide(helper))
    if not sections:
        return request.prompt
    sections.append("# Task\n" + request.prompt)
    return "\n".join(sections)


def prompt_pointer(path: Path) -> str:
    """Return the short argv prompt used when the composed prompt was written to ``path``.

    Args:
        path: The prompt file in the run directory.

    Returns:
        One paragraph asking the agent to read the file first.
    """
    return (
        f"Your task and Octipus's instructions for this run are in the file {path} (written by Octipus "
        "because they are too long for a command line). Read the whole file first, then follow it exactly."
    )


def child_env(base: Mapping[str, str]) -> dict[str, str]:
    """Return the child's environment: ``base`` plus :data:`QUIET_ENV`.

    The bridge helper's variables and ``PATH`` entry are the runtime's to add, as for every vendor
    (:func:`octipusd.adapter_launch.with_bridge_helper`).

    Args:
        base: The runtime's (already filtered) environment for the child.

    Returns:
        A new dict.
    """
    return {**base, **QUIET_ENV}


def _value_flag(name: str, value: str) -> str:
    if "\x00" in value:
        raise AdapterError(f"{name} value contains a NUL character, which cannot be passed on a command line")
    return f"{name}={value}"


def build_launch(request: LaunchRequest, *, helper: str) -> LaunchSpec:
    """Build one agy print-mode invocation (see :meth:`AntigravityAdapter.build_launch`).

    Args:
        request: The launch request.
        helper: Absolute path of ``octipus-bridge``.

    Returns:
        The launch spec.

    In a shared space (``request.space``) the mode is ``plan`` whatever the row says (module
    docstring).

    Raises:
        AdapterError: a resume was requested, an unknown permission mode, a disallowed additive flag,
            a bad ``printTimeoutSeconds``, an invalid bridge, or a NUL character in the model name.
    """
    if request.resume:
        raise AdapterError(
            "antigravity cannot resume a conversation: print mode prints no conversation id and a stale id "
            'silently starts a new conversation (seed 003 "Session reuse"); start the turn cold'
        )
    try:
        mode = PermissionMode(request.permission_mode)
    except ValueError:
        raise AdapterError(
            f"unknown permission mode {request.permission_mode!r}; expected one of "
            f"{', '.join(m.value for m in PermissionMode)}"
        ) from None
    if request.space:
        mode = PermissionMode.PLAN  # the declared space mode (seed 003 "In shared spaces")
    extra = normalize_additive_flags(request.additive_flags)
    timeout = print_timeout_seconds(request.options)
    if request.bridge is not None:
        check_bridge(request.bridge)
    argv: list[str] = [request.binary, *PERMISSION_ARGS[mode]]
    if mode in GRANTS_WORKSPACE:
        argv.append(_value_flag("--add-dir", str(request.cwd)))
    prompt = compose_prompt(request, helper)
    files: dict[Path, str] = {}
    if len(prompt.encode("utf-8", "surrogatepass")) > INLINE_PROMPT_MAX_BYTES or "\x00" in prompt:
        prompt_path = request.run_dir / PROMPT_FILE_NAME
        files[prompt_path] = prompt
        argv.append(_value_flag("--add-dir", str(request.run_dir)))
        prompt = prompt_pointer(prompt_path)
    if request.model:
        argv.append(_value_flag("--model", request.model))
    if timeout:
        argv.append(f"--print-timeout={timeout}s")
    argv.extend(extra)
    argv.append(_value_flag(PRINT_FLAG, prompt))
    return LaunchSpec(
        argv=tuple(argv),
        env=child_env(request.env),
        cwd=request.cwd,
        files=files,
        stdin_mode=StdinMode.DEVNULL,
        initial_input=(),
        secrets=(request.bridge.token,) if request.bridge is not None else (),
    )
