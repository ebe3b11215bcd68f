"""Permission rules (``permissions.rules``): ``toolId(matcher)`` entries at three levels.

Pure: parsing and matching only. The facts below are FACTS.md §3 (from the original product's
``src/security/permission-rules.ts`` and its test) plus Octipus's tool-id families.

Rule syntax: ``toolId(matcher)`` or a bare ``toolId``.

* The matcher runs to the LAST ``)``, so the fork-bomb rule ``shell(:(){ :|:& };:)`` parses.
  The tool id and the matcher are trimmed of surrounding whitespace.
* A bare tool id, an empty matcher or ``*`` matches anything.
* A matcher ending in ``:*`` is a plain string prefix: ``git:*`` matches ``git status`` and also
  ``gitk`` (no word boundary).
* Anything else matches exactly.
* The tool id ``*`` matches every tool. Otherwise a rule's tool id matches a tool id exactly, or
  matches the tool's family: Octipus tool ids are ``<family>__<action>`` (``shell__run``), and
  the rule ``shell(...)`` covers every ``shell__*`` tool. Vendor-native tools are checked as
  ``cli-native:<Tool>`` (``cli-native:Bash``, ``cli-native:mcp__x__y``) and have no family.

Evaluation: deny rules first, then allow, then ask, each in the order given; the first rule that
matches wins; no match returns None and the caller applies :func:`default_level`.

The subject a matcher is compared with is the first argument present among ``command``,
``path``, ``file_path``, ``filePath``, ``url``, ``query``, ``message``. "Present" follows the
original's JavaScript truthiness: a missing key, None, ``""``, ``0``, ``False`` or an empty
list/object is skipped; a non-string value is compared as compact JSON. With none present, the
subject is the action name: by default the tool name of ``cli-native:<Tool>`` and the action of
``<family>__<action>``.

Defaults (used when the setting is None; any value replaces all of them), FACTS.md §3:

* allow: ``shell(git:*)``, ``shell(ls:*)``, ``shell(cat:*)``, ``shell(echo:*)``,
  ``filesystem(*)``, ``knowledge(*)``, ``websearch(*)``, and ``cli-native:<T>(*)`` for Read, Glob,
  Grep, LS, NotebookRead, WebFetch, WebSearch, TodoWrite;
* deny: ``shell(rm -rf /:*)``, ``shell(dd if=/dev:*)``, ``shell(mkfs:*)``, and the fork bomb in
  both its usual spellings ``:(){ :|:& };:`` and ``:(){ :|:&};:`` (the original wrote the latter;
  an exact matcher catches only one, so both are listed);
* ask: ``shell(sudo:*)``, ``shell(docker:*)``, ``shell(systemctl:*)``.

``cli-native:Bash``, ``Edit`` and ``Write`` match no default rule, so they fall to ASK.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from octipusd.errors import InvalidRequestError, RuleSyntaxError
from octipusd.policy.native import KNOWN_NATIVE_TOOLS, READ_ONLY_CLI_TOOLS

CLI_NATIVE_PREFIX: Final = "cli-native:"
#: The legacy aggregate tool id of vendor-native calls: a rule or grant for exactly ``cli-native``
#: covers every ``cli-native:<Tool>`` call (seed 003 "Permissions and limits": existing
#: cli-native policies remain effective). See :mod:`octipusd.policy.engine` for its precedence.
LEGACY_CLI_NATIVE_ID: Final = "cli-native"
FAMILY_SEPARATOR: Final = "__"

#: Argument names whose value is the subject of a matcher, in priority order (FACTS.md §3).
SUBJECT_FIELDS: Final[tuple[str, ...]] = (
    "command",
    "path",
    "file_path",
    "filePath",
    "url",
    "query",
    "message",
)


class Level(enum.StrEnum):
    """A rule's (or a tool's default) permission level."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


#: Order in which the levels' rules are evaluated (FACTS.md §3: deny, then allow, then ask).
EVALUATION_ORDER: Final[tuple[Level, ...]] = (Level.DENY, Level.ALLOW, Level.ASK)

#: The built-in rule set, used when ``permissions.rules`` is None (FACTS.md §3).
DEFAULT_RULES: Final[Mapping[str, tuple[str, ...]]] = {
    "allow": (
        "shell(git:*)",
        "shell(ls:*)",
        "shell(cat:*)",
        "shell(echo:*)",
        "filesystem(*)",
        "knowledge(*)",
        "websearch(*)",
        *(f"{CLI_NATIVE_PREFIX}{tool}(*)" for tool in READ_ONLY_CLI_TOOLS),
    ),
    "deny": (
        "shell(rm -rf /:*)",
        "shell(dd if=/dev:*)",
        "shell(mkfs:*)",
        "shell(:(){ :|:& };:)",
        "shell(:(){ :|:&};:)",
    ),
    "ask": (
        "shell(sudo:*)",
        "shell(docker:*)",
        "shell(systemctl:*)",
    ),
}

#: Default levels of Octipus's own tools that are not ASK (seed 003; the run-context and
#: work-plan tools are always available to a CLI). Delegation (``spawn_child``,
#: ``collect_children``, ``steer_child``) is allowed by default: it is bounded by role, depth and budget, and every
#: call a child makes passes this same policy; a rule can still ask or deny it. Reading and stopping a
#: run's own background command are allowed (starting one asks, as ``shell__run`` does). So are the pipeline
#: tools (issue 27): a pipeline is bounded by its stages and token budget, reached by its own session
#: and workspace only, and every call a stage worker makes passes this same policy. So are the monitor
#: tools (issue 28): a monitor only reads (its probes are read-only tools run as its owner), wakes its
#: own session once, and its wake-up turn runs unattended (an ASK there is refused, never granted).
DEFAULT_TOOL_LEVELS: Final[Mapping[str, Level]] = {
    "get_cli_run_context": Level.ALLOW,
    "get_work_plan": Level.ALLOW,
    "update_work_plan": Level.ALLOW,
    "spawn_child": Level.ALLOW,
    "collect_children": Level.ALLOW,
    "steer_child": Level.ALLOW,
    "create_pipeline": Level.ALLOW,
    "get_pipeline_status": Level.ALLOW,
    "resume_pipeline": Level.ALLOW,
    "stop_pipeline": Level.ALLOW,
    "update_pipeline_items": Level.ALLOW,
    "answer_pipeline_approval": Level.ALLOW,  # the person decides the approval it forwards
    "plan__add_items": Level.ALLOW,
    "monitor__create": Level.ALLOW,
    "monitor__list": Level.ALLOW,
    "monitor__pause": Level.ALLOW,
    "monitor__resume": Level.ALLOW,
    "monitor__cancel": Level.ALLOW,
    "shell__run": Level.ASK,
    "shell__run_background": Level.ASK,
    "shell__read_background": Level.ALLOW,
    "shell__stop_background": Level.ALLOW,
}


def default_level(tool_id: str) -> Level:
    """Return the level that applies to ``tool_id`` when no rule matches.

    ``cli-native:*`` -> ASK (seed 003 "Permissions and limits": everything but the default
    allow list uses the ASK default); ``get_cli_run_context``, ``get_work_plan``,
    ``update_work_plan``, ``spawn_child``, ``collect_children``, ``steer_child``, the pipeline and the
    monitor tools, reading and stopping a background command -> ALLOW (:data:`DEFAULT_TOOL_LEVELS`);
    ``shell__run`` and ``shell__run_background`` -> ASK; any other tool -> ASK.

    Args:
        tool_id: An Octipus tool id or ``cli-native:<Tool>``.

    Returns:
        The default level.
    """
    if tool_id.startswith(CLI_NATIVE_PREFIX):
        return Level.ASK
    return DEFAULT_TOOL_LEVELS.get(tool_id, Level.ASK)


def unmatchable_reason(tool_id: str) -> str | None:
    """Why a rule's tool id can never match a call, or None when it can.

    Catches the two slips a Claude Code user makes: a native tool without the ``cli-native:``
    prefix (``Bash(rm:*)``: calls are checked as ``cli-native:Bash``), and a native tool name in
    the wrong case (``cli-native:bash``: names are case-sensitive).

    Args:
        tool_id: The rule's tool id (before the matcher).

    Returns:
        A sentence to append to "rule X ..." in an error, or None.
    """
    by_lower = {name.lower(): name for name in KNOWN_NATIVE_TOOLS}
    if tool_id.startswith(CLI_NATIVE_PREFIX):
        name = tool_id.removeprefix(CLI_NATIVE_PREFIX)
        known = by_lower.get(name.lower())
        if known is not None and known != name:
            return f"never matches: native tool names are case-sensitive; write {CLI_NATIVE_PREFIX}{known}"
        return None
    known = by_lower.get(tool_id.lower())
    if known is not None:
        return (
            f"never matches: vendor-native calls are checked as {CLI_NATIVE_PREFIX}<Tool>; "
            f"write {CLI_NATIVE_PREFIX}{known}(...)"
        )
    return None


def legacy_identity(tool_id: str) -> str | None:
    """Return the legacy aggregate identity of a call, if it has one.

    Args:
        tool_id: The call's tool id.

    Returns:
        :data:`LEGACY_CLI_NATIVE_ID` for ``cli-native:<Tool>`` calls (seed 003: a vendor-native call
        is checked under its per-tool id and under the legacy ``cli-native`` id); None for every
        other tool id, including the bare ``cli-native`` itself.
    """
    return LEGACY_CLI_NATIVE_ID if tool_id.startswith(CLI_NATIVE_PREFIX) else None


def family_of(tool_id: str) -> str | None:
    """Return the family of an Octipus tool id ``<family>__<action>`` (``shell__run`` -> ``shell``).

    Returns:
        The family, or None for ``cli-native:*`` ids and ids without ``__``.
    """
    if tool_id.startswith(CLI_NATIVE_PREFIX):
        return None
    family, sep, action = tool_id.partition(FAMILY_SEPARATOR)
    if not sep or not family or not action:
        return None
    return family


def default_action(tool_id: str) -> str:
    """Return the action name used as the subject when no subject field is present.

    ``cli-native:<Tool>`` -> ``<Tool>`` (FACTS.md §3 "CLI relay"); ``<family>__<action>`` ->
    ``<action>``; anything else -> the tool id itself.
    """
    if tool_id.startswith(CLI_NATIVE_PREFIX):
        return tool_id.removeprefix(CLI_NATIVE_PREFIX)
    family, sep, action = tool_id.partition(FAMILY_SEPARATOR)
    if sep and family and action:
        return action
    return tool_id


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _falsy(value: Any) -> bool:
    """JavaScript truthiness of a decoded JSON value (the original compared with ``||``)."""
    if value is None or isinstance(value, bool):
        return value is not True
    if isinstance(value, int | float):
        return value == 0 or value != value  # 0, 0.0 and NaN are falsy
    if isinstance(value, str | list | dict):
        return len(value) == 0
    return False


def subject_of(arguments: Mapping[str, Any], action: str) -> str:
    """Return the text a matcher is compared with.

    Args:
        arguments: The tool call's arguments.
        action: The action name used when no subject field is present.

    Returns:
        The first present value among :data:`SUBJECT_FIELDS` (see the module docstring for
        "present"), as text (a ``command`` string as a :class:`CommandSubject`, matched per
        simple command); else ``action``.
    """
    for name in SUBJECT_FIELDS:
        value = arguments.get(name)
        if _falsy(value):
            continue
        return CommandSubject(value) if name == "command" and isinstance(value, str) else _render(value)
    return action


#: How deeply ``$(...)``, ``bash -c`` and ``eval`` are looked into for a DENY or ASK rule.
COMMAND_DEPTH: Final = 3


#: Redirection targets that write nothing: the null device and file descriptors (``2>&1``).
_HARMLESS_TARGETS = frozenset({"/dev/null", "-"})
#: ``git`` options that put configuration (and so commands: ``alias.x=!cmd``, ``core.pager``,
#: ``core.sshCommand``) on the command line.
_GIT_CONFIG_OPTIONS = ("-c", "--config-env", "--exec-path")


def _escapes_allow(command: Any) -> bool:
    """Whether an ALLOW prefix must not cover this simple command (see :class:`CommandSubject`)."""
    for redirect in command.redirects:
        if redirect.is_output and not (redirect.target in _HARMLESS_TARGETS or redirect.target.isdigit()):
            return True
    words = [w for w in command.words if "=" not in w or w.startswith("-")]  # skip VAR=value
    if words and words[0].rsplit("/", 1)[-1] == "git":
        for word in words[1:]:
            if not word.startswith("-"):
                break  # the subcommand: options after it are its own
            if word in _GIT_CONFIG_OPTIONS or word.startswith(("-c", "--config-env=", "--exec-path=")):
                return True
    return False


class CommandSubject(str):
    """A subject taken from a ``command`` argument: a shell command line, matched per command.

    FACTS.md §3 makes ``x:*`` a plain string prefix. Over a whole command line that would let
    ``git:*`` allow ``git status; rm -rf ~`` and keep ``rm:*`` from denying ``ls; rm x`` (found
    by a user trial), so a command line is split into its simple commands
    (:mod:`octipusd.policy.shellwords`) and:

    * a DENY or ASK rule matches when it accepts the whole line, any of its top-level simple
      commands, or any command it runs (wrappers such as ``sudo`` unwrapped; ``$(...)``,
      ``bash -c`` and ``eval`` looked into, :data:`COMMAND_DEPTH` levels);
    * an ALLOW rule matches a line that is one simple command without command substitution
      when it accepts the line as written (``git:*`` still matches ``gitk``, as FACTS.md says),
      and a line of several simple commands only when it accepts every one of them; a line with
      a command substitution, one that cannot be split, one that writes a file through an output
      redirection (``echo x > /tmp/f``: the prefix names a harmless command, not a write), or a
      ``git`` command given configuration on its command line (``git -c alias.x=!cmd x`` runs
      any command) is never allowed by a matcher (only by a rule that accepts anything). All
      three were found by user trials.
    """

    _split: tuple[tuple[str, ...] | None, tuple[str, ...]] | None

    def __new__(cls, value: str) -> CommandSubject:
        """Wrap ``value`` (the command line); it is split on first use."""
        made = super().__new__(cls, value)
        made._split = None
        return made

    def _parts(self) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
        if self._split is None:
            from octipusd.policy import shellwords  # local: shellwords is only needed for commands

            top: tuple[str, ...] | None
            try:
                parsed = shellwords.parse(str(self), strict=True)
                unallowable = parsed.substitutions or any(_escapes_allow(c) for c in parsed.commands)
                top = None if unallowable else tuple(" ".join(c.words) for c in parsed.commands)
                direct = tuple(" ".join(c.words) for c in parsed.commands)
            except ValueError:
                top, direct = None, ()
            walked = tuple(
                " ".join((c.name, *c.args))
                for c in shellwords.walk(str(self), max_depth=COMMAND_DEPTH)
                if c.name
            )
            self._split = (top, direct + walked)
        return self._split

    def accepted_by(self, matches: Callable[[str], bool], level: Level) -> bool:
        """Whether a matcher (``matches(text)``) accepts this line for a rule of ``level``.

        Args:
            matches: The matcher's test on one text.
            level: The rule's level (DENY/ASK: any part; ALLOW: the rules in the class docstring).

        Returns:
            True when the rule applies to this command line.
        """
        top, parts = self._parts()
        if level is not Level.ALLOW:
            return matches(str(self)) or any(matches(part) for part in parts)
        if top is None or not top:
            return False
        if len(top) == 1:
            return matches(str(self))
        return all(matches(part) for part in top)


@dataclass(frozen=True)
class Rule:
    """One parsed rule.

    Attributes:
        level: The level the rule grants when it matches.
        tool_id: The tool id (``shell``, ``shell__run``, ``cli-native:Bash``, ``*``).
        matcher: The matcher text; None for a bare tool id (matches anything).
        text: The rule as written (untrimmed), for explanations.
    """

    level: Level
    tool_id: str
    matcher: str | None
    text: str

    @property
    def matches_anything(self) -> bool:
        """Whether the matcher accepts every subject (bare, empty or ``*``)."""
        return self.matcher is None or self.matcher in ("", "*")

    def applies_to(self, tool_id: str) -> bool:
        """Whether the rule's tool id covers ``tool_id`` (``*``, exact, or the tool's family)."""
        return self.tool_id in ("*", tool_id) or self.tool_id == family_of(tool_id)

    def matches_subject(self, subject: str) -> bool:
        """Whether the matcher accepts ``subject`` (any / ``prefix:*`` / exact).

        A shell command line (a :class:`CommandSubject`) is matched per simple command, so a
        prefix rule cannot be stretched past ``;``, ``&&``, ``|`` or ``$(...)``
        (:meth:`CommandSubject.accepted_by`).
        """
        if self.matches_anything:
            return True
        if isinstance(subject, CommandSubject):
            return subject.accepted_by(self._matches_text, self.level)
        return self._matches_text(subject)

    def _matches_text(self, text: str) -> bool:
        assert self.matcher is not None
        if self.matcher.endswith(":*"):
            return text.startswith(self.matcher[:-2])
        return text == self.matcher

    def matches(self, tool_id: str, subject: str) -> bool:
        """Whether the rule matches a call of ``tool_id`` whose subject is ``subject``."""
        return self.applies_to(tool_id) and self.matches_subject(subject)


def parse_rule(text: str, level: Level | str) -> Rule:
    """Parse ``toolId(matcher)`` or a bare ``toolId``.

    Args:
        text: The rule as written.
        level: The level of the list it came from.

    Returns:
        The rule; ``matcher`` is None for a bare tool id.

    Raises:
        RuleSyntaxError: ``level`` is not allow/ask/deny, the text is not a string or is empty, the tool
            id is empty or contains whitespace or ``)``, a ``(`` has no closing ``)``, or text
            follows the last ``)``. The message quotes the rule and says what is wrong.
    """
    try:
        rule_level = Level(level)
    except ValueError:  # the enum's own refusal, said for a person
        raise RuleSyntaxError(text, f"unknown rule level {level!r}; expected allow, ask or deny") from None
    if not isinstance(text, str):
        raise RuleSyntaxError(text, f"permission rule {text!r} is not a string")
    stripped = text.strip()
    if not stripped:
        raise RuleSyntaxError(text, "permission rule is empty; write toolId or toolId(matcher)")
    open_at = stripped.find("(")
    if open_at < 0:
        tool_id, matcher = stripped, None
    else:
        close_at = stripped.rfind(")")
        if close_at < open_at:
            raise RuleSyntaxError(
                text, f"permission rule {text!r} has '(' without a closing ')'; write toolId(matcher)"
            )
        trailing = stripped[close_at + 1 :]
        if trailing.strip():
            raise RuleSyntaxError(
                text,
                f"permission rule {text!r} has text after its last ')' ({trailing!r}); the matcher must "
                "end the rule",
            )
        tool_id = stripped[:open_at].strip()
        matcher = stripped[open_at + 1 : close_at].strip()
    if not tool_id:
        raise RuleSyntaxError(
            text, f"permission rule {text!r} has no tool id; write toolId or toolId(matcher)"
        )
    if ")" in tool_id or any(c.isspace() for c in tool_id):
        raise RuleSyntaxError(
            text,
            f"permission rule {text!r}: tool id {tool_id!r} must not contain spaces or ')'; "
            "write toolId or toolId(matcher)",
        )
    return Rule(level=rule_level, tool_id=tool_id, matcher=matcher, text=text)


def check_rule(text: str, level: Level | str) -> Rule:
    """Validate a rule being written (a stored rule, or a grant's ``toolId(matcher)``).

    Args:
        text: The rule as written.
        level: Its level.

    Returns:
        The parsed rule.

    Raises:
        RuleSyntaxError: It does not parse (:func:`parse_rule`).
        InvalidRequestError: It parses but can never match a call (:func:`unmatchable_reason`).
    """
    rule = parse_rule(text, level)
    unmatchable = unmatchable_reason(rule.tool_id)
    if unmatchable is not None:
        raise InvalidRequestError(f"rule {text!r} {unmatchable}")
    return rule


def check_tool_id(tool_id: str) -> None:
    """Validate a bare tool id as a rule's would be (``rules explain``): not empty, no whitespace,
    no parentheses.

    Raises:
        InvalidRequestError: naming the field and what a tool id may hold.
    """
    if not tool_id or any(c.isspace() for c in tool_id) or "(" in tool_id or ")" in tool_id:
        raise InvalidRequestError(
            f"tool_id: {tool_id!r} is not a tool id (it must be non-empty, without spaces or parentheses; "
            "e.g. shell__run or cli-native:Bash)"
        )


def check_grant(tool_id: str, matcher: str | None, level: Level | str) -> Rule:
    """Validate a grant being written exactly like a rule (:func:`check_rule`).

    The grant's tool id must be what its rule text ``toolId(matcher)`` parses to, so a tool id
    holding spaces or parentheses (``a b``, ``x(y)``) is refused here rather than stored (a
    stored one could not be loaded).

    Args:
        tool_id: The grant's tool id, as given.
        matcher: Its matcher (None: any subject).
        level: Its level.

    Returns:
        The grant as a rule.

    Raises:
        RuleSyntaxError: The tool id is empty or holds whitespace, ``(`` or ``)``; or the level
            is unknown.
        InvalidRequestError: The tool id can never match a call.
    """
    text = tool_id if matcher is None else f"{tool_id}({matcher})"
    rule = check_rule(text, level)
    if rule.tool_id != tool_id or (matcher is None and rule.matcher is not None):
        raise RuleSyntaxError(
            text,
            f"grant tool id {tool_id!r} must be a bare tool id, without spaces or parentheses "
            "(give the matcher separately: --matcher)",
        )
    return rule


@dataclass(frozen=True)
class Match:
    """The rule that decided a call.

    Attributes:
        level: The decided level (the rule's).
        rule: The rule that matched first.
        builtin: Whether the rule comes from the built-in defaults (the setting was None).
    """

    level: Level
    rule: Rule
    builtin: bool = False

    def explain(self) -> str:
        """One line for people, e.g. ``allow by rule cli-native:Read(*) (built-in default)``."""
        origin = "built-in default" if self.builtin else "permissions.rules"
        return f"{self.level} by rule {self.rule.text} ({origin})"


@dataclass(frozen=True)
class RuleSet:
    """An ordered set of rules: deny rules, then allow, then ask.

    Attributes:
        rules: The rules in evaluation order.
        builtin: Whether these are the built-in defaults.
    """

    rules: tuple[Rule, ...]
    builtin: bool = False

    @classmethod
    def defaults(cls) -> RuleSet:
        """Return the built-in rule set (:data:`DEFAULT_RULES`)."""
        return cls(_parse_lists(DEFAULT_RULES), builtin=True)

    @classmethod
    def from_rules(cls, rules: Iterable[Rule]) -> RuleSet:
        """Build a set from parsed rules, ordered deny, allow, ask (stable within a level)."""
        items = list(rules)
        ordered = tuple(r for level in EVALUATION_ORDER for r in items if r.level is level)
        return cls(ordered)

    @classmethod
    def from_setting(cls, value: Mapping[str, Any] | None) -> RuleSet:
        """Build the set from the ``permissions.rules`` setting.

        Args:
            value: None for the built-in defaults; else ``{"allow"?: [...], "deny"?: [...],
                "ask"?: [...]}`` with rule strings (a missing or null list is empty). Any value
                replaces all the defaults, so ``{}`` means no rules at all.

        Returns:
            The rule set.

        Raises:
            ValueError: ``value`` is not an object, has a key other than allow/deny/ask, a list is
                not a list of strings, or an entry does not parse; the message names the key and
                the entry.
        """
        if value is None:
            return cls.defaults()
        if not isinstance(value, Mapping):
            raise ValueError(
                f"permissions.rules must be an object {{allow?: [], deny?: [], ask?: []}} or null, "
                f"got {type(value).__name__}"
            )
        unknown = [k for k in value if k not in ("allow", "deny", "ask")]
        if unknown:
            raise ValueError(
                f"permissions.rules has unknown key(s) {', '.join(map(repr, unknown))}; "
                "expected allow, deny, ask"
            )
        return cls(_parse_lists(value))

    def decide(self, tool_id: str, arguments: Mapping[str, Any], action: str | None = None) -> Match | None:
        """Find the first matching rule for a call.

        Args:
            tool_id: The tool id (``shell__run``, ``cli-native:Bash``...).
            arguments: The call's arguments.
            action: The action name used as subject when no subject field is present; None means
                :func:`default_action` of the tool id.

        Returns:
            The match, or None when no rule matches (the caller applies :func:`default_level`).
        """
        subject = subject_of(arguments, default_action(tool_id) if action is None else action)
        for rule in self.rules:
            if rule.matches(tool_id, subject):
                return Match(level=rule.level, rule=rule, builtin=self.builtin)
        return None

    def level_for(self, tool_id: str, arguments: Mapping[str, Any], action: str | None = None) -> Level:
        """Return the decided level: the first matching rule's, else :func:`default_level`."""
        match = self.decide(tool_id, arguments, action)
        return match.level if match is not None else default_level(tool_id)


def _parse_lists(value: Mapping[str, Any]) -> tuple[Rule, ...]:
    rules: list[Rule] = []
    for level in EVALUATION_ORDER:
        entries = value.get(level.value)
        if entries is None:
            continue
        if isinstance(entries, str) or not isinstance(entries, Sequence):
            raise ValueError(f"permissions.rules.{level.value} must be a list of rule strings")
        for index, entry in enumerate(entries):
            if not isinstance(entry, str):
                raise ValueError(
                    f"permissions.rules.{level.value}[{index}] is {entry!r}, "
                    "not a rule string like 'shell(git:*)'"
                )
            try:
                rules.append(parse_rule(entry, level))
            except RuleSyntaxError as exc:
                raise ValueError(f"permissions.rules.{level.value}[{index}]: {exc.problem}") from None
    return tuple(rules)
