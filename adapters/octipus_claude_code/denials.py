"""Octipus's native-tool denials as Claude Code's own deny list (``--disallowedTools``).

Why: Claude approves some calls itself and never relays them to Octipus (reads in every mode;
in ``acceptEdits``, Octipus's ``workspace`` mode, also file edits and common filesystem commands
such as ``rm``, ``rmdir`` and ``touch``; observed with claude 2.1.197: ``rm victim.txt``,
``rmdir d`` and a ``Write`` of a new file ran with no ``can_use_tool`` request). A DENY that only
the relay applies would then not hold for them, while seed 003 "Permissions and limits" says "a
denial under either identity wins". Claude's deny rules hold before any of its own approvals, in
every mode, ``bypassPermissions`` included (CCDOCS ``permissions.md`` in sources.md §1.4: "Order:
deny → ask → allow, first match wins"; observed with 2.1.197 in acceptEdits, bypassPermissions,
plan and default). So :func:`translate_denials` turns ``LaunchRequest.denied_native`` into Claude
permission rules, passed as ``--disallowedTools=<rule>``, one token per rule.

The flag (``claude --help`` of 2.1.197: ``--disallowedTools, --disallowed-tools <tools...>``, "Comma
or space-separated list of tool names to deny (e.g. "Bash(git *) Edit")"). Observed with 2.1.197:
repeated ``--disallowedTools=<rule>`` tokens add up (``--disallowedTools=Bash(rm:*)
--disallowedTools=Write`` refused both), a rule holding spaces and commas inside its parentheses
stays one rule (``Bash(echo a, b)`` refused exactly ``echo a, b``), and the ``=`` form binds only
its own token: the ``--permission-mode=acceptEdits`` token after them still set the mode.

Claude's rule syntax (CCDOCS ``permissions.md``, sources.md §1.4; code.claude.com
``docs/zh-CN/permissions.md``, in translation: a bare tool name like ``Bash`` removes the tool from
Claude's context, a scoped rule like ``Bash(rm *)`` keeps the tool and blocks matching calls;
docs.anthropic.com ``claude-code/iam``: ``//path`` is an absolute path from the filesystem root),
each point checked on 2.1.197:

* A bare tool name denies every use and removes the tool from Claude's context (the model's call
  then ends in "No such tool available: Write. Write exists but is not enabled in this context";
  ``Bash(*)`` behaves the same).
* ``Bash(<text>)`` is an exact command, and ``*`` is a wildcard matching any characters;
  ``Bash(rm*)`` refused ``rm victim.txt`` and ``rmdir d``, which is Octipus's plain-prefix meaning of
  ``rm:*``. Claude's own ``Bash(rm:*)`` means ``Bash(rm *)``, a word-boundary prefix (it refused
  ``rm victim.txt`` but ran ``rmdir d``), so it is never emitted. Claude also refuses a compound
  command when one part matches (``echo a && rm victim.txt``) and looks past leading variable
  assignments (``FOO=1 rm victim.txt``). In the
  rule text ``\\(``, ``\\)`` and ``\\\\`` stand for ``(``, ``)`` and ``\\`` (``Bash(echo \\(hi\\))``
  refused ``echo (hi)``; ``Bash(echo a\\\\b)`` refused ``echo a\\b``); ``\\*`` is no literal star
  (``Bash(echo \\*)`` did not refuse ``echo *``).
* Path rules exist for ``Read`` and ``Edit`` and follow gitignore patterns; ``//path`` is an
  absolute path from the filesystem root (the docs' table: ``Read(//Users/alice/secrets/**)``
  matches ``/Users/alice/secrets/**``). ``Read(//ws/secret.txt)`` refused Read of that file (and
  Bash ``cat secret.txt``, so Claude applies it to reads by commands as well); ``Read(//ws/sec*)``
  refused ``/ws/secret.txt`` and ``/ws/secdir/x.txt`` (a match of a folder covers what is inside),
  which is Octipus's plain prefix ``/ws/sec``; ``*`` matched ``.env``. "Edit rules apply to all
  built-in tools that edit files": ``Edit(//ws/w1.txt)`` refused a ``Write`` of it, while
  ``Write(//ws/w1.txt)`` was accepted without a warning and refused nothing.

Translation of one Octipus text (``Tool`` or ``Tool(matcher)``, FACTS.md §3 matchers: ``*`` or
empty = anything, ``x:*`` = plain prefix ``x``, else exact):

* any tool, matcher accepting anything (or the prefix ``""``) -> the bare ``Tool``;
* ``Bash``: prefix ``x`` -> ``Bash(x*)``, exact ``x`` -> ``Bash(x)``, with ``\\``, ``(``, ``)``
  escaped;
* ``Read``: absolute path ``/p`` -> ``Read(//p)``, prefix ``/p`` -> ``Read(//p*)``;
* ``Write``, ``Edit``, ``MultiEdit``: the same paths as ``Edit(//p)`` / ``Edit(//p*)`` (the only path
  rule Claude applies to writes; it refuses every file-editing tool on those paths, not only the
  denied one);
* ``*`` (the legacy ``cli-native`` deny, or a ``*`` deny: every native tool) -> every tool name in
  :data:`CLAUDE_NATIVE_TOOLS`; ``*(matcher)`` -> that matcher translated for ``Bash``, ``Read`` and the
  edit tools where it can be;
* ``mcp__<bridge>__*`` (Octipus's own tools): never handed over; they are decided on the bridge
  under their Octipus ids.

Where Claude refuses more than the Octipus rule (all observed with 2.1.197, all confined to the
denied command or path, and so kept): a compound command one part of which matches, or one behind
variable assignments; ``Bash(x *)`` (from the prefix ``x :*``) also refuses the bare ``x``; a
``Read`` path rule also refuses commands reading that path (``cat``) and, for a folder, what is
inside; an ``Edit`` path rule refuses every file-editing tool on the path. No refusal of another
command or path was seen.

What cannot be translated exactly is not widened to a whole-tool deny (that would refuse calls
Octipus allows) and not dropped in silence: it stays enforced on relayed calls, and
:attr:`DenialTranslation.relay_only` lists it with the reason, for a run notice. Such are Bash
matchers with ``*`` (a wildcard to Claude), shell operators, redirections or expansions
(``; & | < > $ #`` and backquotes: Claude matches each part of a compound command separately, so
``Bash(cat v4 | rm*)`` did not refuse ``cat v4 | rm v4``), control characters, or a prefix ending
in ``:`` (``x:*`` would read as Claude's word-boundary form); relative, ``~``, non-normalised or
pattern-syntax (``* ? [ ] { } ! # \\ ( )``) paths; matchers of any other tool (``WebFetch`` URL
matchers among them: Claude's ``WebFetch(domain:host)`` covers every scheme, port and path of the
host, which no Octipus URL prefix equals; ``Glob``/``Grep``/``LS`` have no path rules of their
own, and 2.1.197 offers none of the three); and tool names that are not plain identifiers.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

#: Every native tool name Claude Code has offered: the ``tools`` of 2.1.197's ``system/init``, plus
#: names 2.1.197 knows but does not enable (``Agent``, ``BashOutput``, ``Glob``, ``Grep``,
#: ``KillShell``, ``TodoWrite``) and names of other 2.x releases (``LS``, ``MultiEdit``,
#: ``NotebookRead``, ``SlashCommand``, ``ToolSearch``), so a legacy all-native deny also holds with
#: another binary. Each is denied by name. For a name it does not know, 2.1.197 only prints
#: ``Permission deny rule "LS" matches no known tool — check for typos.`` on stderr and runs on
#: (observed). MCP tools (``mcp__*``) are not here.
CLAUDE_NATIVE_TOOLS: Final[tuple[str, ...]] = (
    "Agent",
    "AskUserQuestion",
    "Bash",
    "BashOutput",
    "CronCreate",
    "CronDelete",
    "CronList",
    "Edit",
    "EnterPlanMode",
    "EnterWorktree",
    "ExitPlanMode",
    "ExitWorktree",
    "Glob",
    "Grep",
    "KillShell",
    "LS",
    "MultiEdit",
    "NotebookEdit",
    "NotebookRead",
    "Read",
    "ReportFindings",
    "ScheduleWakeup",
    "SendMessage",
    "Skill",
    "SlashCommand",
    "Task",
    "TaskCreate",
    "TaskGet",
    "TaskList",
    "TaskOutput",
    "TaskStop",
    "TaskUpdate",
    "TodoWrite",
    "ToolSearch",
    "WebFetch",
    "WebSearch",
    "Workflow",
    "Write",
)

#: The flag, in the ``--flag=value`` form used for every value flag (see :mod:`.launch`).
DISALLOWED_TOOLS_FLAG: Final = "--disallowedTools"

#: The text ``LaunchRequest.denied_native`` uses for "every native tool" (``octipusd.policy.engine.
#: Policy.native_denials``: a legacy ``cli-native`` or a ``*`` deny).
ALL_NATIVE: Final = "*"

#: Native tools whose Octipus subject is a file path (``file_path``, FACTS.md §3) -> the Claude tool
#: whose path rules cover them.
PATH_RULE_TOOLS: Final[dict[str, str]] = {
    "Read": "Read",
    "Write": "Edit",
    "Edit": "Edit",
    "MultiEdit": "Edit",
}

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]+")
_SHELL_SYNTAX = frozenset(";&|<>$`#")
_PATH_SYNTAX = frozenset("*?[]{}!#\\()")
_WHY_NOT: Final[dict[str, str]] = {
    "WebFetch": (
        "Claude matches WebFetch only by host (WebFetch(domain:host), every scheme, port and path of "
        "it), which no Octipus URL matcher equals"
    ),
    "Glob": "Claude has no path rule for Glob (its Read path rules cover other tools too)",
    "Grep": "Claude has no path rule for Grep (its Read path rules cover other tools too)",
    "LS": "Claude has no path rule for LS (its Read path rules cover other tools too)",
}


@dataclass(frozen=True)
class DenialTranslation:
    """The result of :func:`translate_denials`.

    Attributes:
        rules: Claude permission rules for ``--disallowedTools``, in order, without duplicates
            (``Bash(rm*)``, ``Write``, ``Read(//abs/.env)``).
        relay_only: ``(octipus_rule, reason)`` for each denial (or part of one) not handed to
            Claude; the relay still applies it. ``octipus_rule`` is written with its ``cli-native``
            prefix (``cli-native:Bash(ls *.py:*)``, ``cli-native(rm:*)`` for an all-native one).
    """

    rules: tuple[str, ...] = ()
    relay_only: tuple[tuple[str, str], ...] = ()

    def argv(self) -> tuple[str, ...]:
        """``--disallowedTools=<rule>`` per rule (see the module docstring for why one token each)."""
        return tuple(f"{DISALLOWED_TOOLS_FLAG}={rule}" for rule in self.rules)

    def notice(self) -> str | None:
        """One sentence naming the relay-only denials and why, or None when there are none."""
        if not self.relay_only:
            return None
        items = "; ".join(f"{text} ({reason})" for text, reason in self.relay_only)
        return (
            "some Octipus denials are not in Claude's own deny list, so they hold only for the native "
            "calls Claude relays to Octipus, not for the ones it runs without asking (reads; in "
            f"acceptEdits mode also edits and common filesystem commands; every call in bypass mode): {items}"
        )


def _split(text: str) -> tuple[str, str | None] | None:
    """``Tool(matcher)`` -> ``(Tool, matcher)``; bare -> ``(Tool, None)``; None if malformed.

    Same reading as ``octipusd.policy.rules.parse_rule``: the matcher runs to the last ``)``, both
    parts are trimmed.
    """
    stripped = text.strip()
    open_at = stripped.find("(")
    if open_at < 0:
        return (stripped, None) if stripped else None
    close_at = stripped.rfind(")")
    if close_at < open_at or stripped[close_at + 1 :].strip():
        return None
    name = stripped[:open_at].strip()
    return (name, stripped[open_at + 1 : close_at].strip()) if name else None


def _has_control(value: str) -> bool:
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)


def _bash(matcher: str, prefix: bool) -> str | tuple[None, str]:
    """A Bash matcher as a Claude rule, or ``(None, reason)``."""
    if "*" in matcher:
        return None, "'*' is a wildcard in Claude's Bash rules and cannot be escaped"
    if _has_control(matcher):
        return None, "it holds control characters"
    if any(c in _SHELL_SYNTAX for c in matcher):
        return None, (
            "it holds shell operators, redirections, expansions or comments, and Claude matches each "
            "part of a compound command separately"
        )
    if prefix and matcher.endswith(":"):
        return None, "a prefix ending in ':' would read as Claude's word-boundary ':*' form"
    escaped = matcher.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return f"Bash({escaped}*)" if prefix else f"Bash({escaped})"


def _path(claude_tool: str, matcher: str, prefix: bool) -> str | tuple[None, str]:
    """An absolute-path matcher as ``Read(//...)`` / ``Edit(//...)``, or ``(None, reason)``."""
    if not matcher.startswith("/") or matcher.startswith("//"):
        return None, (
            "not an absolute path: Claude reads a relative path rule as a pattern for any folder, "
            "and expands '~'"
        )
    if _has_control(matcher) or any(c in _PATH_SYNTAX for c in matcher) or matcher != matcher.strip():
        return None, "it holds characters that are pattern syntax in Claude's (gitignore) path rules"
    parts = matcher.split("/")[1:]
    inner, last = (parts[:-1], parts[-1]) if prefix else (parts, None)
    if any(p in ("", ".", "..") for p in inner) or last in (".", ".."):
        return None, "not a normalised path: Claude compares normalised paths"
    return f"{claude_tool}(/{matcher}*)" if prefix else f"{claude_tool}(/{matcher})"


def _translate_one(name: str, matcher: str | None) -> str | tuple[None, str]:
    """One native tool's denial as one Claude rule, or ``(None, reason)``."""
    if matcher is None or matcher in ("", "*", ":*"):
        if not _TOOL_NAME.fullmatch(name):
            return None, "not a plain tool name"
        return name
    prefix = matcher.endswith(":*")
    value = matcher[:-2] if prefix else matcher
    if name == "Bash":
        return _bash(value, prefix)
    claude_tool = PATH_RULE_TOOLS.get(name)
    if claude_tool is not None:
        return _path(claude_tool, value, prefix)
    return None, _WHY_NOT.get(name, f"Claude has no rule for {name} that matches exactly this")


def translate_denials(denied: Sequence[str], *, bridge_server: str = "octipus") -> DenialTranslation:
    """Translate ``LaunchRequest.denied_native`` to Claude deny rules (see the module docstring).

    Args:
        denied: Octipus rule texts without the ``cli-native:`` prefix (``Bash(rm:*)``, ``Write``,
            ``Read(/abs/.env)``, ``*`` or ``*(matcher)`` for every native tool).
        bridge_server: The MCP server name of Octipus's bridge; ``mcp__<it>__*`` tools are left
            out (decided on the bridge).

    Returns:
        The rules for ``--disallowedTools`` and the denials that stay relay-only, with reasons.
    """
    rules: list[str] = []
    relay_only: list[tuple[str, str]] = []
    bridge_prefix = f"mcp__{bridge_server}__"

    def keep(rule: str) -> None:
        if rule not in rules:
            rules.append(rule)

    for text in denied:
        parsed = _split(text)
        if parsed is None:
            relay_only.append((f"cli-native:{text}", "it does not parse as Tool or Tool(matcher)"))
            continue
        name, matcher = parsed
        if name == ALL_NATIVE:
            if matcher is None or matcher in ("", "*", ":*"):
                for tool in CLAUDE_NATIVE_TOOLS:
                    keep(tool)
                continue
            handed: list[str] = []
            for tool in ("Bash", *PATH_RULE_TOOLS):
                result = _translate_one(tool, matcher)
                if isinstance(result, str):
                    keep(result)
                    if result not in handed:
                        handed.append(result)
            given = f"handed to Claude as {', '.join(handed)}; " if handed else ""
            relay_only.append(
                (f"cli-native({matcher})", f"{given}Claude cannot apply one matcher to every native tool")
            )
            continue
        if name.startswith(bridge_prefix):
            relay_only.append(
                (
                    f"cli-native:{text.strip()}",
                    "Octipus's own tools are decided on the bridge under their Octipus ids "
                    f"(deny {name.removeprefix(bridge_prefix)}, not cli-native:{name})",
                )
            )
            continue
        result = _translate_one(name, matcher)
        if isinstance(result, str):
            keep(result)
        else:
            relay_only.append((f"cli-native:{text.strip()}", result[1]))
    return DenialTranslation(tuple(rules), tuple(relay_only))
