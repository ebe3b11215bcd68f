"""Octipus settings: pydantic-settings over a TOML file and ``OCTIPUS_*`` environment variables.

Keys are the seeds' names (seed 003 "Executable paths and pipeline recovery")::

    # $XDG_CONFIG_HOME/octipus/config.toml  (or octipusd --config PATH)
    [cliModels]
    path = "/usr/local/bin:/usr/bin:/bin"       # replaces the login PATH used to find CLIs
    [cliModels.claudeCode]
    binaryPath = "claude"                       # a command name or an absolute path
    [cliModels.codexCli]
    binaryPath = "/opt/codex/bin/codex"
    [cliModels.antigravityCli]
    binaryPath = "agy"
    [cliModels.mistralVibe]                     # not a seed key: Vibe had no binary setting there
    binaryPath = "vibe-acp"
    [agent]
    promptDumps = true                          # write each CLI prompt to ~/.octipus/prompts (0600, 7 days)
    flowGuard = "ask"                           # "ask" (default) or "off" (FACTS.md §9)
    compactionThresholdChars = 200000           # compact a session past this many uncovered characters (0: never)
    compactionKeepTurns = 2                     # recent turns a compaction keeps verbatim
    processContainment = "auto"                 # "auto", "cgroup" or "subreaper" (how a run's processes are kept)
    maxConcurrentRuns = 4                       # runs working at once (default: memory / RUN_MEMORY_MIB, at least 1)
    minFreeMemoryMiB = 1024                     # a run starts only if it leaves this much available (0: no check)
    pipelineTokenBudget = 2000000               # tokens one pipeline's stages may use (0: off; env PIPELINE_TOKEN_BUDGET)
    [orchestrator]
    maxPipelineStages = 10                      # steps one pipeline template may have (octipusd.settings_orchestrator)
    [schedules]
    catchUpMissed = true                        # fire the latest slot missed while down, once (octipusd.settings_schedules)
    [permissions]
    rules = { allow = ["cli-native:Bash(git:*)"], ask = [], deny = [] }   # replaces the built-in rules
    [database]
    url = "postgresql+psycopg://user@/octipus?host=/run/postgresql"
    connectTimeoutSeconds = 10                  # PostgreSQL: reaching the server (libpq connect_timeout)
    statementTimeoutSeconds = 30                # one statement, lock waits included (SQLite: busy timeout)
    [daemon]
    socket = "/run/user/1000/octipus/octipusd.sock"
    approvalTimeoutSeconds = 300                # managed-run approval wait, at most 5 minutes
    runTimeoutSeconds = 3600                    # active work of one run (approval waits excluded)
    [notify]
    urls = ["ntfy://ntfy.sh/my-topic"]          # Apprise URLs (octipusd.settings_notify); empty: off
    [security]
    shellSandbox = "auto"                       # off (default), auto or required (octipusd.settings_security)
    [mcpServers.ledger]                         # an external MCP server; tools published as ledger__<tool>
    transport = "stdio"                         # or "http" with url = "https://..." and headers = {...}
    command = "ledger-mcp"
    args = ["--ledger", "/srv/ledger.tsv"]
    trustRecoveryHints = false                  # seed 000: trust readOnlyHint / not_executed declarations
    riskClass = "irreversible"                  # default of its mutating tools (seed 004)
    [mcpServers.ledger.tools.append_entry]      # per-tool recovery contract
    riskClass = "compensatable"
    idempotencyKey = "key"                      # the argument carrying the call's idempotency key
    probe = { tool = "find_entry", arguments = { key = "{idempotencyKey}" } }
    compensation = { tool = "remove_entry", arguments = { key = "{idempotencyKey}" } }

Sources, highest first: explicit arguments, the TOML file, ``OCTIPUS_<SECTION>__<KEY>``
variables (e.g. ``OCTIPUS_DAEMON__APPROVALTIMEOUTSECONDS``), then the seed's first-boot
variables ``OCTIPUS_CLI_PATH``, ``OCTIPUS_DATABASE_URL``, the original's ``AGENT_FLOW_GUARD``, and
each adapter's binary variable (``OCTIPUS_CLAUDE_BINARY``, ``OCTIPUS_CODEX_BINARY``,
``OCTIPUS_ANTIGRAVITY_BINARY``, ``OCTIPUS_VIBE_BINARY``). The first-boot names are
defaults: a value in the file wins over them, as a saved setting wins over its first-boot
environment equivalent in the seed.

The ``cliModels.<key>`` sections are the adapters': each adapter declares its settings key and its
binary variable (``Adapter.setting_key``, ``Adapter.binary_env``), and the daemon passes them to
:func:`load_settings` as :class:`VendorBinary` entries; a section no adapter declares is an
unknown setting. Nothing here names a vendor.

An invalid value raises :class:`~octipusd.errors.ConfigError` whose message names the key,
where it came from (file or variable) and what is accepted; ``octipusd`` prints it and exits
with code 2 before binding anything.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from octipusd.errors import ConfigError
from octipusd.paths import (
    default_socket_path as default_socket_path,
    xdg_data_dir as xdg_data_dir,
    xdg_runtime_dir as xdg_runtime_dir,
)
from octipusd.settings_notify import NOTIFY_ACCEPTED, NotifySettings
from octipusd.settings_orchestrator import (
    DEFAULT_PIPELINE_TOKEN_BUDGET,
    ORCHESTRATOR_ACCEPTED,
    ORCHESTRATOR_FIRST_BOOT_ENV,
    OrchestratorSettings,
    adopt_older_budget,
)
from octipusd.settings_schedules import SCHEDULES_ACCEPTED, SchedulesSettings
from octipusd.settings_security import SECURITY_ACCEPTED, SecuritySettings
from octipusd.settings_swarm import SWARM_ACCEPTED, SWARM_FIRST_BOOT_ENV, SwarmSettings
from octipusd.settings_web import WEB_ACCEPTED, WebSettings

#: First-boot environment names from seed 003 other than the adapters' binary variables
#: (:class:`VendorBinary`), mapped to their dotted setting keys.
FIRST_BOOT_ENV: dict[str, str] = {
    "OCTIPUS_CLI_PATH": "cliModels.path",
    "OCTIPUS_DATABASE_URL": "database.url",
    "AGENT_FLOW_GUARD": "agent.flowGuard",
    **SWARM_FIRST_BOOT_ENV,
    **ORCHESTRATOR_FIRST_BOOT_ENV,
}


@dataclass(frozen=True)
class VendorBinary:
    """One adapter's binary setting, as the adapter declares it.

    Attributes:
        key: The ``cliModels.<key>`` section (``Adapter.setting_key``, e.g. ``claudeCode``).
        env: Its first-boot variable (``Adapter.binary_env``, e.g. ``OCTIPUS_CLAUDE_BINARY``), or None.
    """

    key: str
    env: str | None = None


#: The resident memory one vendor CLI is counted as growing to, in MiB (a Claude Code process is
#: commonly 1.5-2 GB resident): the unit of the default of ``agent.maxConcurrentRuns`` and of the
#: memory check (``octipusd.runtime.admission`` holds the rule).
RUN_MEMORY_MIB = 1792
#: Default of ``agent.minFreeMemoryMiB``: the memory, in MiB, a new run must leave available.
DEFAULT_MIN_FREE_MEMORY_MIB = 1024

#: What each key accepts, for error messages.
ACCEPTED: dict[str, str] = {
    "cliModels.path": "a ':'-separated list of absolute directories",
    "binaryPath": "a command name without '/' (looked up on the PATH) or an absolute path",
    "agent.promptDumps": "true or false",
    "agent.flowGuard": "ask or off",
    "agent.compactionThresholdChars": "a number of characters >= 0 (0 turns automatic compaction off)",
    "agent.compactionKeepTurns": "a number of turns from 0 to 100",
    "agent.processContainment": "auto, cgroup or subreaper",
    "agent.maxConcurrentRuns": "a whole number of runs from 1 to 10000 (unset: the machine's memory divided by "
    f"{RUN_MEMORY_MIB} MiB, at least 1)",
    "agent.minFreeMemoryMiB": "a whole number of MiB from 0 (no memory check) to 16777216",
    "permissions.rules": "a table {allow = [...], ask = [...], deny = [...]} of rule strings such as "
    "'cli-native:Bash(git:*)'",
    "database.url": "sqlite:///ABSOLUTE/PATH or postgresql+psycopg://USER@HOST/DB",
    "database.connectTimeoutSeconds": "whole seconds from 2 to 300",
    "database.statementTimeoutSeconds": "seconds greater than 0 and at most 3600",
    "daemon.socket": "an absolute path",
    "daemon.approvalTimeoutSeconds": "a number of seconds greater than 0 and at most 300",
    "daemon.webPort": "nothing any more: it was replaced by web.port (0 for a free port) and web.enabled",
    "daemon.runTimeoutSeconds": "seconds of active work one run may take (approval waits excluded), at most 7 days",
    **SWARM_ACCEPTED,
    **WEB_ACCEPTED,
    **NOTIFY_ACCEPTED,
    **SECURITY_ACCEPTED,
    **ORCHESTRATOR_ACCEPTED,
    **SCHEDULES_ACCEPTED,
    "mcpServers": "a table [mcpServers.<name>] per MCP server; names are 1-40 letters, digits or '-'",
    "transport": "stdio (with command) or http (with url)",
    "trustRecoveryHints": "true or false (default false)",
    "terminationCancelsCalls": "true or false (default false; a TOML boolean, not a string)",
    "connectTimeoutSeconds": "seconds greater than 0 and at most 300",
    "callTimeoutSeconds": "seconds greater than 0 and at most 7200",
    "riskClass": "reversible, compensatable, containable or irreversible",
    "deadlineSeconds": "seconds greater than 0",
    "idempotencyKey": "the name of a top-level string argument of the tool",
}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _check_binary(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not value:
        raise ValueError("must not be empty")
    if "/" in value and not value.startswith("/"):
        raise ValueError(f"{value!r} is a relative path")
    return value


class BinarySetting(_Section):
    """``cliModels.<cli>``: where the vendor binary is."""

    binaryPath: str | None = None

    _v = field_validator("binaryPath")(classmethod(lambda cls, v: _check_binary(v)))


class CliModels(_Section):
    """``cliModels``: executable resolution (seed 003): ``path`` and one section per adapter key.

    The sections are the adapters' (:class:`VendorBinary`): :func:`load_settings` validates them
    against the declared keys (see :func:`_declared_cli_models`); this base model holds them by key.
    """

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    path: str | None = None
    __pydantic_extra__: dict[str, BinarySetting] = Field(init=False)

    @property
    def sections(self) -> Mapping[str, BinarySetting]:
        """The ``cliModels.<key>`` sections by adapter settings key."""
        return {key: value for key, value in self if isinstance(value, BinarySetting)}

    def binary_path(self, key: str) -> str | None:
        """``cliModels.<key>.binaryPath``, or None when unset."""
        section = self.sections.get(key)
        return section.binaryPath if section is not None else None

    @field_validator("path")
    @classmethod
    def _path(cls, v: str | None) -> str | None:
        if v is None:
            return None
        parts = [p for p in v.split(":") if p]
        if not parts:
            raise ValueError("is empty")
        bad = [p for p in parts if not p.startswith("/")]
        if bad:
            raise ValueError(f"{bad[0]!r} is not an absolute directory")
        return ":".join(parts)


#: Seed 003 "Plans, feedback and delegation": follow-up invocations a run makes at most when guidance
#: remains after its vendor finished ("up to two"); ``agent.maxFollowUps`` may lower it.
MAX_FOLLOW_UPS = 2

#: ``agent.processContainment``: how a run's processes are kept together (octipusd.runner.containment).
ContainmentSetting = Literal["auto", "cgroup", "subreaper"]


class AgentSettings(_Section):
    """``agent``: prompt dumps, the flow guard (``flowGuard``: ``ask`` or ``off``; FACTS.md §9,
    first-boot environment variable ``AGENT_FLOW_GUARD``) and compaction (seed 003 "Compaction":
    a finished root turn compacts the session once its messages after the last checkpoint exceed
    ``compactionThresholdChars`` characters, keeping ``compactionKeepTurns`` recent turns) and how
    a run's processes are kept together (``processContainment``: ``auto`` takes a run cgroup when
    one can be made, else the daemon becomes a child subreaper; ``cgroup`` insists, ``subreaper``
    forces the fallback). Admission (``octipusd.runtime.admission``): at most ``maxConcurrentRuns``
    runs work at once (None: derived from the machine's memory at start-up), and a run starts only
    if it leaves ``minFreeMemoryMiB`` MiB available (0 turns the memory check off); others wait in
    ``queued``. ``maxFollowUps``: follow-up invocations a run makes at most for guidance left when its
    vendor finished (:data:`MAX_FOLLOW_UPS`, the seed's two, is also the highest value).
    ``pipelineTokenBudget``: tokens one pipeline's stage workers may use in all, 0: no budget (first-boot
    variable ``PIPELINE_TOKEN_BUDGET``; the older key ``orchestrator.pipelineTokenBudget`` is read when
    this one is not set)."""

    promptDumps: bool = True
    flowGuard: Literal["ask", "off"] = "ask"
    compactionThresholdChars: int = Field(default=200_000, ge=0)
    compactionKeepTurns: int = Field(default=2, ge=0, le=100)
    processContainment: ContainmentSetting = "auto"
    maxConcurrentRuns: int | None = Field(default=None, ge=1, le=10_000)
    minFreeMemoryMiB: int = Field(default=DEFAULT_MIN_FREE_MEMORY_MIB, ge=0, le=16_777_216)
    maxFollowUps: int = Field(default=MAX_FOLLOW_UPS, ge=0, le=MAX_FOLLOW_UPS)
    pipelineTokenBudget: int = Field(default=DEFAULT_PIPELINE_TOKEN_BUDGET, ge=0)


class PermissionsSettings(_Section):
    """``permissions``: the operator's rules (None = the built-in defaults)."""

    rules: dict[str, list[str]] | None = None

    @field_validator("rules")
    @classmethod
    def _rules(cls, v: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        if v is None:
            return None
        unknown = set(v) - {"allow", "ask", "deny"}
        if unknown:
            raise ValueError(f"unknown list {sorted(unknown)[0]!r}")
        return v


#: Default of ``database.connectTimeoutSeconds``: how long connecting to a PostgreSQL server may
#: take, in whole seconds (libpq's ``connect_timeout``, which counts 2 at least).
DATABASE_CONNECT_TIMEOUT_SECONDS = 10
#: Default of ``database.statementTimeoutSeconds``: how long one database statement may take,
#: waiting for a lock included, in seconds (PostgreSQL ``statement_timeout``; SQLite busy timeout).
DATABASE_STATEMENT_TIMEOUT_SECONDS = 30.0


class DatabaseSettings(_Section):
    """``database``: the store URL (None = SQLite under the XDG data dir) and its timeouts.

    Attributes:
        url: The store URL.
        connectTimeoutSeconds: PostgreSQL only: how long connecting to the server may take.
        statementTimeoutSeconds: How long one statement may take, waiting for a lock included
            (PostgreSQL's ``statement_timeout``; on SQLite the busy timeout, how long a write
            waits for another writer). Past it the call fails with
            :class:`~octipusd.errors.DatabaseTimeoutError` and its transaction is rolled back.
    """

    url: str | None = None
    connectTimeoutSeconds: int = Field(default=DATABASE_CONNECT_TIMEOUT_SECONDS, ge=2, le=300)
    statementTimeoutSeconds: float = Field(default=DATABASE_STATEMENT_TIMEOUT_SECONDS, gt=0, le=3600)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return None
        if not (v.startswith("sqlite:///") or v.startswith("postgresql+psycopg://")):
            raise ValueError(f"unsupported URL scheme in {v.split('://')[0]!r}")
        return v


class DaemonSettings(_Section):
    """``daemon``: socket and approval wait."""

    socket: Path | None = None
    approvalTimeoutSeconds: float = Field(default=300.0, gt=0, le=300)
    runTimeoutSeconds: float = Field(default=3600.0, gt=0, le=7 * 24 * 3600)
    webPort: Any = Field(default=None, exclude=True, repr=False)  # replaced: any value is refused

    @field_validator("webPort", mode="before")
    @classmethod
    def _web_port(cls, v: Any) -> None:
        if v is not None:
            raise ValueError(
                f"daemon.webPort = {v!r} was replaced by the [web] section: move the port to web.port "
                "and turn the page on or off with web.enabled (the page now serves by default)"
            )

    @field_validator("socket")
    @classmethod
    def _socket(cls, v: Path | None) -> Path | None:
        if v is not None and not v.is_absolute():
            raise ValueError(f"{str(v)!r} is not absolute")
        return v


#: ``mcpServers`` names: 1-40 letters, digits or "-". No "_" (the published tool name
#: ``<server>__<tool>`` must split unambiguously) and no "." (the journal identity
#: ``<server>.<tool>`` splits at the first dot).
MCP_SERVER_NAME_PATTERN = r"^[A-Za-z0-9-]{1,40}$"
#: Server names that would publish tools clashing with Octipus's own (``shell__run``).
RESERVED_MCP_SERVER_NAMES = frozenset({"octipus", "shell"})
#: The placeholder a probe or compensation argument value may be, replaced by the call's key.
IDEMPOTENCY_KEY_PLACEHOLDER = "{idempotencyKey}"

_MCP_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")

RiskClassName = Literal["reversible", "compensatable", "containable", "irreversible"]


def _uses_key_placeholder(value: Any) -> bool:
    if isinstance(value, str):
        return value == IDEMPOTENCY_KEY_PLACEHOLDER
    if isinstance(value, Mapping):
        return any(_uses_key_placeholder(v) for v in value.values())
    if isinstance(value, list):
        return any(_uses_key_placeholder(v) for v in value)
    return False


class McpToolCallSettings(_Section):
    """A probe or compensation: a tool of the same MCP server and its arguments.

    ``arguments`` values (at any depth) that are exactly ``"{idempotencyKey}"`` are replaced by
    the key of the call being checked or offset.
    """

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    @field_validator("tool")
    @classmethod
    def _tool(cls, v: str) -> str:
        if not _MCP_TOOL_NAME.match(v):
            raise ValueError(f"{v!r} is not an MCP tool name (1-128 letters, digits, '_', '-' or '.')")
        return v

    @property
    def uses_idempotency_key(self) -> bool:
        """True when an argument value is the ``{idempotencyKey}`` placeholder."""
        return _uses_key_placeholder(self.arguments)


class McpToolSettings(_Section):
    """``mcpServers.<name>.tools.<tool>``: recovery overrides of one tool (seed 004 contract).

    Attributes:
        riskClass: Overrides the server's ``riskClass``.
        owner: Overrides the server's ``owner`` (who receives unresolved outcomes).
        deadlineSeconds: Overrides the server's ``deadlineSeconds``.
        idempotencyKey: Name of a top-level string argument whose (non-empty) value is the
            call's idempotency key.
        probe: Read-only verification tool of the same server, answering
            ``{"status": "applied" | "not_applied"}``.
        compensation: Tool of the same server that offsets the effect.
        callTimeoutSeconds: Overrides the server's ``callTimeoutSeconds`` for this tool (its
            declared deadline: until ``started`` plus it, a request may still land).
    """

    riskClass: RiskClassName | None = None
    owner: str | None = Field(default=None, min_length=1)
    deadlineSeconds: float | None = Field(default=None, gt=0)
    callTimeoutSeconds: float | None = Field(default=None, gt=0, le=7200)
    idempotencyKey: str | None = Field(default=None, min_length=1)
    probe: McpToolCallSettings | None = None
    compensation: McpToolCallSettings | None = None

    @model_validator(mode="after")
    def _placeholders_need_a_key(self) -> McpToolSettings:
        for label, call in (("probe", self.probe), ("compensation", self.compensation)):
            if call is not None and call.uses_idempotency_key and self.idempotencyKey is None:
                raise ValueError(
                    f"{label} arguments use {IDEMPOTENCY_KEY_PLACEHOLDER!r} but the tool sets no idempotencyKey "
                    "(name the argument that carries the key)"
                )
        return self


class McpServerSettings(_Section):
    """``mcpServers.<name>``: one external MCP server the per-run bridge offers to agents.

    Attributes:
        transport: ``stdio`` (spawn ``command``) or ``http`` (streamable HTTP at ``url``).
        command: Executable of a stdio server (required for stdio).
        args: Its arguments.
        env: Extra environment variables of a stdio server (over a minimal inherited set).
        cwd: Working directory of a stdio server.
        url: Endpoint of an http server (required for http; http or https).
        headers: Extra HTTP headers (e.g. ``Authorization``).
        enabled: False keeps the server configured but unused.
        trustRecoveryHints: Trust the server's recovery declarations (seed 000, off by
            default): only then does an exact ``annotations.readOnlyHint: true`` skip the
            journal and an ``isError`` result with ``_meta["octipus/recovery"].outcome ==
            "not_executed"`` count as proof that nothing ran. Applies on the next connection.
        connectTimeoutSeconds: Bound of connecting, the handshake and the tool listing.
        callTimeoutSeconds: Bound of one ``tools/call``; past it the call is uncertain. It is
            also the call's in-flight bound: after a crash or a timeout, a probe's "not
            applied" settles the action only once this long (plus the bridge's margin) has
            passed since it started, unless its transport was ended. That bound assumes the
            server does not go on with a call longer than this: set it to at least the longest
            time the server may work on one call.
        terminationCancelsCalls: The server cancels every call of a session it was still
            running when that session ends (an HTTP ``DELETE`` of the ``Mcp-Session-Id``, or
            the stdio server's processes stopped), and does its work inside the call. Then a
            restarted daemon that ended the session of a request it left in flight settles that
            action by its probe at once instead of waiting out ``callTimeoutSeconds``. Off by
            default; servers built on the MCP Python SDK's streamable HTTP session manager do
            (checked with mcp 2.3); declare it only for a server known to.
        riskClass: Default risk class of the server's mutating tools (seed 004).
        owner: Default named owner of unresolved outcomes (None: the run's user).
        deadlineSeconds: Default escalation deadline of an unconfirmed action.
        tools: Per-tool overrides, keyed by the server's tool name.
    """

    transport: Literal["stdio", "http"]
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True
    # declarations of trust: a TOML boolean only, never a string or number coerced to one
    trustRecoveryHints: bool = Field(default=False, strict=True)
    terminationCancelsCalls: bool = Field(default=False, strict=True)
    connectTimeoutSeconds: float = Field(default=15.0, gt=0, le=300)
    callTimeoutSeconds: float = Field(default=300.0, gt=0, le=7200)
    riskClass: RiskClassName = "irreversible"
    owner: str | None = Field(default=None, min_length=1)
    deadlineSeconds: float = Field(default=3600.0, gt=0)
    tools: dict[str, McpToolSettings] = Field(default_factory=dict)

    @field_validator("tools")
    @classmethod
    def _tool_names(cls, v: dict[str, McpToolSettings]) -> dict[str, McpToolSettings]:
        for name in v:
            if not _MCP_TOOL_NAME.match(name):
                raise ValueError(f"{name!r} is not an MCP tool name (1-128 letters, digits, '_', '-' or '.')")
        return v

    @model_validator(mode="after")
    def _transport_fields(self) -> McpServerSettings:
        if self.transport == "stdio":
            if self.command is None:
                raise ValueError("transport stdio needs command (the server executable)")
            if self.url is not None or self.headers:
                raise ValueError("url and headers apply only to transport http")
        else:
            if self.url is None:
                raise ValueError("transport http needs url (http:// or https://)")
            parsed = urlsplit(self.url)
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise ValueError(f"url {self.url!r} is not an http:// or https:// URL with a host")
            if self.command is not None or self.args or self.env or self.cwd is not None:
                raise ValueError("command, args, env and cwd apply only to transport stdio")
        return self


class _TomlSource(PydanticBaseSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], data: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = dict(data)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


class _FirstBootEnvSource(PydanticBaseSettingsSource):
    def __init__(
        self, settings_cls: type[BaseSettings], environ: Mapping[str, str], names: Mapping[str, str]
    ) -> None:
        super().__init__(settings_cls)
        self._environ = environ
        self._names = names

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, key in self._names.items():
            value = self._environ.get(name)
            if value is None or value == "":
                continue
            _set_dotted(out, key, value)
        return out


def _set_dotted(target: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = value


def _get_dotted(source: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    cur: Any = source
    for part in key.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return False, None
        cur = cur[part]
    return True, cur


class Settings(BaseSettings):
    """All Octipus settings. Build with :func:`load_settings`, not directly.

    Attributes:
        cliModels: Executable resolution.
        agent: Agent behaviour (prompt dumps).
        permissions: Permission rules.
        database: Store URL.
        daemon: Socket and approval wait.
        mcpServers: External MCP servers offered to agents through the bridge, by name.
        swarm: Child agents: worktrees, limits per level, contract retries.
        web: The page's loopback listener.
        notify: Notifications through Apprise URLs (:mod:`octipusd.settings_notify`).
        security: The shell sandbox (:mod:`octipusd.settings_security`).
        orchestrator: Pipeline limits (:mod:`octipusd.settings_orchestrator`).
        schedules: Schedules (:mod:`octipusd.settings_schedules`).
        config_file: The TOML file that was read, if any (not a setting).
    """

    model_config = SettingsConfigDict(
        env_prefix="OCTIPUS_", env_nested_delimiter="__", extra="forbid", frozen=True, case_sensitive=False
    )

    cliModels: CliModels = Field(default_factory=CliModels)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    permissions: PermissionsSettings = Field(default_factory=PermissionsSettings)
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    daemon: DaemonSettings = Field(default_factory=DaemonSettings)
    mcpServers: dict[str, McpServerSettings] = Field(default_factory=dict)
    swarm: SwarmSettings = Field(default_factory=SwarmSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    orchestrator: OrchestratorSettings = Field(default_factory=OrchestratorSettings)
    schedules: SchedulesSettings = Field(default_factory=SchedulesSettings)

    @model_validator(mode="before")
    @classmethod
    def _older_budget(cls, data: Any) -> Any:
        return adopt_older_budget(data)

    @field_validator("mcpServers")
    @classmethod
    def _mcp_server_names(cls, v: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        for name in v:
            if not re.match(MCP_SERVER_NAME_PATTERN, name):
                raise ValueError(
                    f"server name {name!r} is invalid: use 1-40 letters, digits or '-' (no '_' or '.')"
                )
            if name.lower() in RESERVED_MCP_SERVER_NAMES:
                raise ValueError(f"server name {name!r} is reserved for Octipus's own tools; pick another")
        return v

    _toml_data: ClassVar[dict[str, Any]] = {}
    _environ: ClassVar[Mapping[str, str]] = {}
    _first_boot: ClassVar[Mapping[str, str]] = FIRST_BOOT_ENV

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            _TomlSource(settings_cls, cls._toml_data),
            env_settings,
            _FirstBootEnvSource(settings_cls, cls._environ, cls._first_boot),
        )


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """Return ``$XDG_CONFIG_HOME/octipus/config.toml`` (``~/.config`` when unset)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "octipus" / "config.toml"


def first_boot_names(vendors: Sequence[VendorBinary]) -> dict[str, str]:
    """Every first-boot variable -> its dotted key: :data:`FIRST_BOOT_ENV` and the adapters' binaries."""
    names = dict(FIRST_BOOT_ENV)
    for vendor in vendors:
        if vendor.env is not None:
            names.setdefault(vendor.env, f"cliModels.{vendor.key}.binaryPath")
    return names


class _DeclaredCliModels(CliModels):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _declared_cli_models(vendors: Sequence[VendorBinary]) -> type[CliModels]:
    """``cliModels`` with one typed section per declared key and no other (an unknown key is an
    unknown setting; ``OCTIPUS_CLIMODELS__<KEY>__BINARYPATH`` matches its key in any case)."""
    sections: dict[str, Any] = {
        vendor.key: (BinarySetting, Field(default_factory=BinarySetting)) for vendor in vendors
    }
    return create_model("CliModels", __base__=_DeclaredCliModels, **sections)


def _origin(
    key: str,
    toml_data: Mapping[str, Any],
    config_file: Path | None,
    environ: Mapping[str, str],
    first_boot: Mapping[str, str],
) -> str:
    present, _ = _get_dotted(toml_data, key)
    if present and config_file is not None:
        return f"file {config_file}"
    nested = "OCTIPUS_" + "__".join(key.split(".")).upper()
    for name in environ:
        if name.upper() == nested:
            return f"environment variable {name}"
    for name, dotted in first_boot.items():
        if dotted == key and environ.get(name):
            return f"environment variable {name}"
    return "defaults"


def _accepted(key: str) -> str:
    if key in ACCEPTED:
        return ACCEPTED[key]
    leaf = key.rsplit(".", 1)[-1]
    return ACCEPTED.get(leaf, "see the Configuration section of the README")


def load_settings(
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    vendors: Sequence[VendorBinary] = (),
) -> Settings:
    """Read settings from the TOML file and the environment.

    Args:
        config_file: Explicit file (``--config``); it must exist. None reads
            :func:`default_config_path` when it exists.
        environ: Environment to read (defaults to ``os.environ``).
        vendors: The installed adapters' binary settings (their ``cliModels.<key>`` sections and
            first-boot variables); a ``cliModels`` section not among them is an unknown setting.

    Returns:
        The validated, frozen settings.

    Raises:
        ConfigError: a file is missing or not TOML, a key is unknown or a value invalid. The
            message names each bad key, where it came from and the accepted values.
    """
    env = dict(os.environ if environ is None else environ)
    path = config_file
    data: dict[str, Any] = {}
    if path is None:
        candidate = default_config_path(env)
        path = candidate if candidate.is_file() else None
    elif not path.is_file():
        raise ConfigError(f"config file {path} does not exist; create it or drop --config")
    if path is not None:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc

    cli_models = _declared_cli_models(vendors)
    first_boot = first_boot_names(vendors)
    bound = create_model(
        "Settings", __base__=Settings, cliModels=(cli_models, Field(default_factory=cli_models))
    )
    bound._toml_data = data
    bound._environ = env
    bound._first_boot = first_boot

    saved = os.environ.copy()
    try:
        if environ is not None:  # env_settings reads os.environ
            os.environ.clear()
            os.environ.update(env)
        try:
            loaded = bound()
        except ValidationError as exc:
            lines = []
            for err in exc.errors():
                key = ".".join(str(p) for p in err["loc"])
                origin = _origin(key, data, path, env, first_boot)
                if err["type"] == "extra_forbidden":
                    lines.append(f"{key}: unknown setting (from {origin}); check the spelling of the key")
                else:
                    msg = err["msg"].removeprefix("Value error, ")
                    lines.append(f"{key}: {msg} (from {origin}); accepted: {_accepted(key)}")
            raise ConfigError("invalid setting: " + "; ".join(lines)) from None
    finally:
        if environ is not None:
            os.environ.clear()
            os.environ.update(saved)
    return loaded


def socket_path(settings: Settings, environ: Mapping[str, str] | None = None) -> Path:
    """Return the daemon socket path: ``daemon.socket`` or :func:`default_socket_path`."""
    return settings.daemon.socket or default_socket_path(environ)
