"""The adapter protocol (the adapter SDK): launch request in, argv/env/files out; lines in, typed events out.

An adapter is pure. It builds the launch of one vendor CLI invocation and parses that
vendor's output lines into :class:`VendorEvent` objects; it never touches a process, socket
or database. The runtime owns the process (``octipusd.runner``), the bridge and the store.

Adapters are discovered through the ``octipus.adapters`` entry-point group; built-in
adapters are registered the same way (see ``pyproject.toml``). An entry point names a class
(or factory) that, called with no arguments, returns an object satisfying :class:`Adapter`.

Parsing rules every adapter follows:

* unknown fields are kept (``raw``), unknown event types become :class:`UnknownEvent`;
* a line that is not JSON becomes :class:`UnparsedLine` keeping the raw text; the parser
  never raises on vendor input;
* lines can be any length; framing is the runner's job, not the parser's.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from octipusd.adapter_events import (
    JSON,
    ControlCancelEvent,
    ErrorEvent,
    EventKind,
    PermissionRequestEvent,
    ResultEvent,
    RunFailureEvent,
    SessionEvent,
    StatusEvent,
    StdinWriteEvent,
    SteeringAckEvent,
    TextEvent,
    ThinkingEvent,
    ToolResultEvent,
    ToolUseEvent,
    UnknownEvent,
    UnparsedLine,
    Usage,
    UsageEvent,
    VendorEvent,
)
from octipusd.errors import AdapterError

__all__ = [
    "BRIDGE_CALL_TIMEOUT_SECONDS",
    "JSON",
    "Adapter",
    "AdapterDefaults",
    "BridgeEndpoint",
    "CapabilityRow",
    "ControlCancelEvent",
    "ErrorEvent",
    "EventKind",
    "LaunchRequest",
    "LaunchSpec",
    "PermissionDecision",
    "PermissionMode",
    "PermissionRequestEvent",
    "ResultEvent",
    "RunFailureEvent",
    "SessionEvent",
    "StatusEvent",
    "StdinMode",
    "StdinWriteEvent",
    "Steering",
    "SteeringAckEvent",
    "StreamParser",
    "StreamParserDefaults",
    "TextEvent",
    "ThinkingEvent",
    "ToolResultEvent",
    "ToolUseEvent",
    "UnknownEvent",
    "UnparsedLine",
    "Usage",
    "UsageEvent",
    "VendorEvent",
    "load_adapters",
]

#: Wall clock of one bridge tool request in seconds, queue, approval and delegation waits included
#: (seed 003: "a separate two-hour vendor wall-clock timeout"). The bridge enforces it
#: (``BridgeLimits.request_timeout_seconds``); adapters give the vendor's own MCP tool timeout
#: :attr:`BridgeEndpoint.tool_timeout_seconds`, which the bridge sets a little above it.
BRIDGE_CALL_TIMEOUT_SECONDS = 7200.0


class PermissionMode(enum.StrEnum):
    """Octipus permission modes of a model row (seed 003 "Permissions and limits").

    ``workspace`` maps to Claude's ``acceptEdits`` (the default), ``full`` to the vendor's
    bypass, ``plan`` to the vendor's planning mode, ``default`` asks for everything but
    reads.
    """

    WORKSPACE = "workspace"
    FULL = "full"
    PLAN = "plan"
    DEFAULT = "default"


class StdinMode(enum.StrEnum):
    """How the runner connects the vendor's stdin.

    ``stream``: a pipe kept open for stream-json input and control responses, closed after
    the turn's result. ``devnull``: ``/dev/null`` (Codex exec blocks on an open pipe,
    observed.md §2.1).
    """

    STREAM = "stream"
    DEVNULL = "devnull"


@dataclass(frozen=True)
class BridgeEndpoint:
    """Where the run's loopback MCP bridge listens.

    Attributes:
        url: ``http://127.0.0.1:<port>/mcp``.
        token: The run's capability (bearer token, >= 256 bits, URL-safe base64).
        server_name: The MCP server name the vendor sees (tools appear as
            ``mcp__<server_name>__<tool>`` in Claude).
        tool_timeout_seconds: How long the vendor's MCP client waits for one tool call before it
            gives up (Codex ``tool_timeout_sec``, Claude's per-server ``timeout``, Vibe's
            ``tool_timeout_sec``); their own defaults are shorter (60 s for Codex and Vibe).
    """

    url: str
    token: str
    server_name: str = "octipus"
    tool_timeout_seconds: float = BRIDGE_CALL_TIMEOUT_SECONDS


@dataclass(frozen=True)
class LaunchRequest:
    """Everything an adapter needs to build one invocation.

    Attributes:
        binary: Absolute path of the resolved vendor executable.
        cwd: Working directory of the run (the session's workspace or a worktree).
        run_dir: A private (0700) folder for this run where the adapter's files are written.
        prompt: The user text of this turn.
        vendor_session_id: The vendor conversation id to start (``resume=False``) or resume.
        resume: Whether to resume ``vendor_session_id`` instead of starting it.
        model: Vendor model name, or None for the vendor default.
        permission_mode: The row's Octipus permission mode.
        bridge: The run's MCP bridge, or None for a run without Octipus tools.
        env: The base environment for the child, built by the runtime from an allowlist
            (:func:`octipusd.environment.vendor_environment`).
        additive_flags: Allowed extra flags of the model row (validated by the adapter).
        system_prompt: Instructions appended to the vendor's system prompt, or None.
        options: The model row's ``metadata.cliAgent`` object (e.g. ``transport``,
            ``inheritApiKeys``, vendor endpoint settings); adapters ignore keys they do not know.
        turn_limit: Maximum model turns for vendors that take a turn cap, or None.
        token_limit: Maximum tokens for vendors that take their own token cap, or None.
        space: True when the run serves an agent in a shared space (seed 003 "In shared
            spaces"): the adapter launches in its declared space mode, where native tools cannot
            act outside Octipus's decision path, or raises :class:`AdapterError` if it has none.
        denied_native: Octipus's DENY entries for vendor-native tools in force for this session
            (``octipusd.policy.engine.Policy.native_denials``), as Octipus rule texts without the
            ``cli-native:`` prefix: ``Bash(rm:*)``, ``Write``, ``Read(/abs/path/.env)``, and ``*``
            or ``*(<matcher>)`` for a legacy ``cli-native`` (or ``*``) deny covering every native
            tool. The vendor may approve some native calls itself without relaying them (edits in
            Claude's ``acceptEdits``, reads in every mode), so an adapter whose CLI takes a deny
            list passes these to it, where they hold before any of the CLI's own approvals (seed
            003: "a denial under either identity wins"); the relay still applies them to every
            relayed call. An adapter that cannot pass one faithfully says so in
            :attr:`LaunchSpec.notices` instead of widening or dropping it silently.
        thread_usage: The usage (tokens) Octipus stored for the earlier runs of
            ``vendor_session_id``, supplied by the runtime only when the adapter declares that
            this launch's vendor reports thread totals (:meth:`Adapter.usage_is_cumulative`);
            the parser subtracts it so that its events and totals are this turn's own. None
            otherwise.
    """

    binary: str
    cwd: Path
    run_dir: Path
    prompt: str
    vendor_session_id: str | None = None
    resume: bool = False
    model: str | None = None
    permission_mode: PermissionMode = PermissionMode.WORKSPACE
    bridge: BridgeEndpoint | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    additive_flags: Sequence[str] = ()
    system_prompt: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    turn_limit: int | None = None
    token_limit: int | None = None
    space: bool = False
    denied_native: Sequence[str] = ()
    thread_usage: Usage | None = None


@dataclass(frozen=True)
class LaunchSpec:
    """A built launch: what the runner executes.

    Attributes:
        argv: Full argument vector, ``argv[0]`` the binary.
        env: Complete environment of the child process.
        cwd: Working directory.
        files: Files to write (mode 0600) before spawning, path -> content.
        stdin_mode: How stdin is connected.
        initial_input: Lines (without trailing newline) written to stdin right after spawn.
        secrets: Values that must never appear in logs or events (the capability).
        notices: Sentences for the run's people about how the launch honours the request, which
            the runtime emits as ``notice`` events before the run starts (e.g. which of
            ``LaunchRequest.denied_native`` apply only to calls the vendor relays to Octipus).
    """

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    files: Mapping[Path, str] = field(default_factory=dict)
    stdin_mode: StdinMode = StdinMode.STREAM
    initial_input: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()


# ---------------------------------------------------------------------------- protocol


@dataclass(frozen=True)
class Steering:
    """How a parser delivers user guidance into the running turn (seed 003 "Plans, feedback
    and delegation"). The runtime ends the vendor's input after a result only when every guidance
    it wrote was acknowledged before that result (Claude may fold it into the running request).

    Attributes:
        lines: Lines to write to the vendor's stdin; the parser answers them with a :class:`SteeringAckEvent`.
    """

    lines: tuple[str, ...]


@dataclass(frozen=True)
class CapabilityRow:
    """What a model row of this adapter offers: seed 003's "Permissions and limits" row.

    Attributes:
        adapter: The table's adapter label, e.g. ``"Claude Code / GLM / Kimi"``.
        octipus_tools: How the vendor reaches Octipus's tools (``Scoped MCP``, ``Terminal bridge``).
        vendor_planning_mode: What Octipus's plan mode maps to (``plan``, ``read-only sandbox``...).
        activity: How progress arrives (``Structured stream``, ``Buffered text``...).
        vendor_approval_relay: Whether and how the vendor's approvals enter Octipus approvals.
    """

    adapter: str
    octipus_tools: str
    vendor_planning_mode: str
    activity: str
    vendor_approval_relay: str


@dataclass(frozen=True)
class PermissionDecision:
    """Octipus's answer to a :class:`PermissionRequestEvent`.

    Attributes:
        allow: True to let the tool run.
        message: Reason shown to the model on a denial.
        updated_input: Input the tool runs with on an allow (defaults to the request's).
    """

    allow: bool
    message: str = ""
    updated_input: JSON | None = None


class StreamParser(Protocol):
    """Per-run, stateful parser of one vendor's output lines.

    Parsers inherit :class:`StreamParserDefaults` for the members a vendor may leave at their
    default (:meth:`steer`).
    """

    def feed(self, line: bytes) -> list[VendorEvent]:
        """Parse one complete line (without its newline) into zero or more events.

        Never raises on vendor input: undecodable or non-JSON lines become
        :class:`UnparsedLine`, unknown types :class:`UnknownEvent`.
        """
        ...

    def total_usage(self) -> Usage:
        """Usage of the whole run so far, each vendor message counted once (tokens)."""
        ...

    def finish(self, exit_code: int | None) -> list[VendorEvent]:
        """Called once after stdout reached EOF and the process ended; returns final events.

        Buffered vendors (plain text printed at the end, no result line) produce their
        text and :class:`ResultEvent` here; streaming vendors usually return ``[]``.

        Args:
            exit_code: The vendor's exit code (negative: killed by that signal), or None.
        """
        ...

    def steer(self, text: str) -> Steering | None:
        """Deliver user guidance into the running turn, or None when this vendor (or the turn, now)
        cannot take it; the runtime then queues it for the run context and the next turn."""
        ...

    def prompt_pending(self) -> bool:
        """Whether the vendor has yet to acknowledge taking the launch prompt, for a vendor that
        acknowledges it (Claude replays it): a result until then answered something else, so
        the vendor's taking the prompt after the result that ended the turn makes the turn go on."""
        ...


@runtime_checkable
class Adapter(Protocol):
    """One vendor CLI. Implementations are pure (no I/O) and cheap to construct.

    Attributes:
        name: Registry name (``claude-code``), used on model rows and in session keys.
        display_name: Human name of the vendor CLI.
        setting_key: The ``cliModels.<key>`` of its binary setting (``claudeCode``).
        binary_env: The first-boot environment variable of that setting (``OCTIPUS_CLAUDE_BINARY``),
            or None for none; adapters sharing a setting key share it.
        default_binary: Command name looked up on PATH when no binary is configured.
        supports_resume: Whether the vendor can continue its own conversation by id.
        transports: The values ``metadata.cliAgent.transport`` may take, default first; empty
            for a vendor with one way of running (a row naming a transport is then refused).
        config_env: The vendor's own configuration variables passed from the daemon's
            environment (names, or prefixes ending in ``*``: ``CLAUDE_CONFIG_DIR``, ``VIBE_*``);
            never an ``OCTIPUS_*`` one (:mod:`octipusd.environment`).
        api_key_env: The vendor's backend API-key variables (names or prefixes), passed from
            the daemon's environment only with ``metadata.cliAgent.inheritApiKeys: true``.
        space_mode: How the adapter runs in a shared space, where native tools cannot act outside
            Octipus's decision path (one sentence, shown to people), or None: it has none and is
            refused in shared spaces (seed 003 "In shared spaces").
        tool_aliases: The vendor's native tool names that behave like a Claude native tool, mapped
            to it (``commandExecution`` -> ``Bash``), for the flow guard's classification; rules
            still name the vendor's own tools.
    """

    name: str
    display_name: str
    setting_key: str
    binary_env: str | None
    default_binary: str
    supports_resume: bool
    transports: tuple[str, ...]
    config_env: frozenset[str]
    api_key_env: frozenset[str]
    space_mode: str | None
    tool_aliases: Mapping[str, str]

    def version_argv(self, binary: str) -> tuple[str, ...]:
        """Return the argv that prints the binary's version."""
        ...

    def build_launch(self, request: LaunchRequest) -> LaunchSpec:
        """Build argv, env and files for one invocation.

        Every vendor gets the bridge helper's environment (seed 003: "If MCP is unavailable, use
        the run's provided bridge helper"): the runtime starts
        :func:`octipusd.adapter_launch.vendor_launch`, this launch completed with the helper's
        variables, so an adapter sets none of them itself (it may name
        :data:`~octipusd.adapter_launch.BRIDGE_TOKEN_ENV` to its vendor's MCP client) and never puts
        the capability on argv.

        Raises:
            AdapterError: the request cannot be honoured (e.g. a disallowed additive flag).
        """
        ...

    def new_parser(self, request: LaunchRequest | None = None) -> StreamParser:
        """Return a fresh parser for one run's output.

        Args:
            request: The launch the output belongs to (buffered vendors estimate input
                tokens from its prompt); None in tests of recorded streams.
        """
        ...

    def encode_permission_response(
        self, request: PermissionRequestEvent, decision: PermissionDecision
    ) -> str:
        """Encode the stdin line (no newline) answering a permission request."""
        ...

    def encode_control_error(self, request_id: str, message: str) -> str:
        """Encode the stdin line answering an unsupported control request with an error."""
        ...

    def new_session_id(self) -> str | None:
        """Mint a vendor session id before the first turn, or None if the vendor assigns it."""
        ...

    def check_additive_flags(self, flags: Sequence[str]) -> tuple[str, ...]:
        """Validate a model row's additive flags (when the row is saved, and again at spawn).

        Returns:
            The flags normalized (``--flag`` or ``--flag=value``), duplicates dropped.

        Raises:
            AdapterError: a flag is not one of this vendor's allowed additive flags; the message
                names it and lists the allowed ones (seed 003 "Permissions and limits").
        """
        ...

    def session_missing(self, result: ResultEvent) -> bool:
        """True when the vendor's result says the resumed session no longer exists."""
        ...

    # -- declared vendor facts with a default in AdapterDefaults (issue 12: adapters own their vendor)

    def resumable(self, options: Mapping[str, Any]) -> bool:
        """Whether a launch with these ``metadata.cliAgent`` options takes part in session reuse
        (only asked when :attr:`supports_resume`; a vendor may resume on one transport only)."""
        ...

    def usage_is_cumulative(self, request: LaunchRequest) -> bool:
        """Whether this launch's vendor reports the thread's usage so far instead of the turn's; the
        runtime then supplies :attr:`LaunchRequest.thread_usage`, which the parser subtracts."""
        ...

    def stderr_session_missing(self, stderr: str) -> bool:
        """True when a run that printed no result says on stderr that the resumed session is gone."""
        ...

    def encode_interrupt(self, request_id: str) -> str | None:
        """The stdin line that ends the current turn at once (sent before a stop), or None when the
        vendor takes no interrupt."""
        ...

    def capabilities(self, options: Mapping[str, Any]) -> CapabilityRow | None:
        """The capability row of a model row with these ``metadata.cliAgent`` options (the transport
        may change it), shown with the row by the API; None when the adapter describes none."""
        ...

    def follows_up(self, options: Mapping[str, Any]) -> bool:
        """Whether a run invokes its vendor session again for guidance left at its end (seed 003)."""
        ...

    def after_result(self, event: VendorEvent) -> bool:
        """Whether ``event``, printed after the turn's final result, is one the vendor's protocol
        legitimately sends then, and so still belongs to the run. Everything else printed after
        that result is dropped (counted in one notice), unless the vendor only then takes the launch
        prompt (:meth:`StreamParser.prompt_pending`); the vendor has ``RunLimits.result_grace_s``
        from that result to exit."""
        ...


class StreamParserDefaults:
    """Defaults of the :class:`StreamParser` members a vendor may leave out; parsers inherit it."""

    def steer(self, text: str) -> Steering | None:
        """No live guidance: the runtime queues it for the run context and the next turn."""
        return None

    def prompt_pending(self) -> bool:
        """The vendor acknowledges no prompt: a result answers the launch prompt."""
        return False


class AdapterDefaults:
    """Defaults of the :class:`Adapter` members a vendor may leave out; adapters inherit it.

    A vendor fact is declared, never probed: the runtime calls these members on every adapter, and
    an adapter overrides the ones its vendor differs in.
    """

    supports_resume: bool
    display_name: str
    #: No first-boot variable for the binary setting (the settings file still sets it).
    binary_env: str | None = None
    #: No space mode: refused in shared spaces.
    space_mode: str | None = None
    #: No native tool named differently from Claude's.
    tool_aliases: Mapping[str, str] = MappingProxyType({})
    #: No configuration variable of the vendor's own passes from the daemon's environment.
    config_env: frozenset[str] = frozenset()
    #: No API-key variable passes, even with ``inheritApiKeys``.
    api_key_env: frozenset[str] = frozenset()

    def check_additive_flags(self, flags: Sequence[str]) -> tuple[str, ...]:
        """No additive flags: any flag is refused (none refused when none is given).

        Raises:
            AdapterError: a flag was given; the message names it.
        """
        if flags:
            raise AdapterError(
                f"additive flag {flags[0]!r} is not allowed: {self.display_name} declares no additive flags"
            )
        return ()

    def resumable(self, options: Mapping[str, Any]) -> bool:
        """Every transport resumes as the vendor does (:attr:`Adapter.supports_resume`)."""
        return self.supports_resume

    def usage_is_cumulative(self, request: LaunchRequest) -> bool:
        """Usage is reported per turn."""
        return False

    def stderr_session_missing(self, stderr: str) -> bool:
        """The vendor says a resumed session is gone in its result only (:meth:`Adapter.session_missing`)."""
        return False

    def encode_interrupt(self, request_id: str) -> str | None:
        """No interrupt: a stop ends the process."""
        return None

    def capabilities(self, options: Mapping[str, Any]) -> CapabilityRow | None:
        """No capability row: the API shows the row's capabilities as not described."""
        return None

    def follows_up(self, options: Mapping[str, Any]) -> bool:
        """No follow-up invocations (a buffered vendor): guidance left is reported as not applied."""
        return False

    def after_result(self, event: VendorEvent) -> bool:
        """Nothing follows a final result: the vendor's turn is over."""
        return False


def load_adapters(errors: list[str] | None = None) -> dict[str, Adapter]:
    """Load every adapter registered under the ``octipus.adapters`` entry-point group.

    Args:
        errors: When given, an adapter that fails to load is skipped and a message naming its
            entry point is appended here (the daemon keeps serving the others and reports it in
            health). When None, the first failure raises.

    Returns:
        Registry name -> adapter instance.

    Raises:
        AdapterError: an entry point fails to load or does not satisfy :class:`Adapter`, and
            ``errors`` is None.
    """
    adapters: dict[str, Adapter] = {}
    for ep in entry_points(group="octipus.adapters"):
        try:
            adapter = ep.load()()
            if not isinstance(adapter, Adapter):
                raise TypeError("it does not implement the Adapter protocol")
        except Exception as exc:  # a broken plugin names itself
            message = f"adapter entry point {ep.name!r} ({ep.value}) failed to load: {exc}"
            if errors is None:
                raise AdapterError(message) from exc
            errors.append(message)
            continue
        adapters[adapter.name] = adapter
    return adapters
