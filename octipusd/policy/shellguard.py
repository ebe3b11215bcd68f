"""The shell guard: a PreToolUse hook that keeps native writes out of coding agents' configuration.

Seed 003 "In shared spaces": "Octipus's file tools and native writes never write a coding agent's
configuration (.claude/, .codex/, .gemini/, .agents/, .vibe/, .mcp.json) in a space", and the locked
``--settings`` file of a Claude-binary run in a space carries "the shell guard as the only hook"
(FACTS.md §5 "CLI models in a space"). This module is that hook. The Claude adapters register it as
a ``PreToolUse`` command hook with the matcher ``Bash|Write|Edit|MultiEdit|NotebookEdit`` and the
command ``octipus-bridge shell-guard`` (:func:`octipusd.adapterkit.shell_guard_command`).

Hook protocol (Claude Code hooks reference, code.claude.com/docs/en/hooks, and the Agent SDK
permissions page: "Hooks ... A hook can deny the call outright or pass it on"; each point below was
also observed with claude 2.1.197 driven offline against the scripted Anthropic server):

* stdin: one JSON object with ``hook_event_name`` (``"PreToolUse"``), ``tool_name``, ``tool_input``,
  ``tool_use_id``, ``cwd``, ``session_id``, ``transcript_path``, ``permission_mode`` (observed: also
  ``prompt_id`` and ``effort``). ``cwd`` is the Bash tool's current directory: after a ``cd .claude``
  call the next hook input said ``<workspace>/.claude`` (observed).
* A denial is printed on stdout with exit 0::

      {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                              "permissionDecisionReason": "<reason>"}}

  Claude then skips the tool and the permission request: no ``can_use_tool`` reached the stdio relay,
  the model got a ``tool_result`` with ``is_error: true`` and the reason as its content, and the call
  was listed in the result's ``permission_denials`` (observed).
* Empty stdout with exit 0 is "no opinion": the normal permission flow continues, and in a space the
  ``can_use_tool`` request follows the hook (observed: hook first, then the relay's request).
* Exit 2 is a blocking error: the call is refused and stderr is shown to the model (hooks
  reference); the guard exits 2 on an input it cannot read, and the hook command adds ``|| exit 2``
  so a missing helper fails closed too.

What is guarded: a path with a component named ``.claude``, ``.codex``, ``.gemini``, ``.agents`` or
``.vibe`` (the agents' configuration folders, at any depth) or ``.mcp.json`` (project MCP servers),
plus ``.claude.json`` (Claude Code's global configuration, which holds user MCP servers and the
per-folder trust; an addition to the seed's list). Names compare case-insensitively (on a
case-insensitive file system ``.Claude`` is the same folder). A path is checked as written and
resolved against the call's ``cwd`` with symlinks resolved where they exist, so a planted link to
``.claude`` is seen through.

File tools (``Write``, ``Edit``, ``MultiEdit`` use ``tool_input.file_path``; ``NotebookEdit`` uses
``tool_input.notebook_path``): denied when the path is guarded, or missing.

``Bash``: the command is split into simple commands by :func:`octipusd.policy.shellwords.parse`
(shlex with POSIX rules; shell operators and newlines separate commands, quoted or escaped operator
characters do not; line continuations are joined; the body of every ``$(...)`` and backtick
substitution, at any depth, is split as commands of its own), read conservatively: comments and
heredoc body lines are not skipped but split as commands like any other text. The guard is
deliberately conservative. It denies a command line that both

1. mentions a guarded path: a word containing a guarded name (also inside ``$(...)``, ``-c`` code or
   ``of=`` operands), a word that names one through a symlink or from a guarded current directory, a
   glob or brace pattern that could match one (``.c*``, ``.{claude,x}``), or the target of a
   recursive delete (``rm -r``, ``find -delete``/``-exec``, ``git clean``, ``rsync --delete``) that
   holds one; and
2. can write: an output redirection to a file (``>``, ``>>``, ``&>``, ``>|``, ``<>``; ``/dev/null``
   and fd duplications excepted), or any command that is not a known read-only one (``cat``, ``ls``,
   ``grep``... :data:`READ_ONLY_COMMANDS`; ``find`` only without its action flags). Writing commands
   therefore include ``tee``, ``cp``, ``mv``, ``ln``, ``install``, ``rsync``, ``mkdir``, ``touch``,
   ``sed``, ``rm``, interpreters and every unknown program.

So ``cat .claude/settings.json`` passes, ``echo x > .claude/settings.json`` and ``cat .claude/x; npm
test`` do not (split such a line into separate calls). A command that cannot be split (unbalanced
quotes, also inside a substitution) is denied when its text mentions a guarded name, and so is one
with more substitutions than are parsed (:data:`_MAX_PARSED_TEXTS`) when it mentions one.

Limits: this is a lexical check, not a sandbox. A program that writes configuration without naming it
on the command line (a script file, a value computed at run time, a variable set by an earlier call,
a recursive operation deeper than one folder level) is not seen. In a space every Bash call also goes
through Octipus's permission decision (no allow rules are loaded), which remains the decision path;
the guard makes sure that even an allowed call cannot write agent configuration.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import sys
import traceback
from collections.abc import Iterable, Mapping
from typing import Any, Final, TextIO

from octipusd.policy import shellwords

__all__ = [
    "FILE_TOOLS",
    "GUARDED_DIRS",
    "GUARDED_FILES",
    "GUARDED_NAMES",
    "GUARDED_TOOLS",
    "READ_ONLY_COMMANDS",
    "command_decision",
    "deny",
    "guard_decision",
    "guarded_name",
    "main",
]

#: Configuration folders of coding agents (seed 003 "In shared spaces").
GUARDED_DIRS: Final[frozenset[str]] = frozenset({".claude", ".codex", ".gemini", ".agents", ".vibe"})
#: Configuration files: project MCP servers (seed 003) and Claude Code's global configuration.
GUARDED_FILES: Final[frozenset[str]] = frozenset({".mcp.json", ".claude.json"})
#: Every guarded path component (compared case-insensitively).
GUARDED_NAMES: Final[frozenset[str]] = GUARDED_DIRS | GUARDED_FILES

#: Claude Code file tools -> the ``tool_input`` field holding the path they write (Claude Code tools
#: reference; ``file_path`` observed with claude 2.1.197 for ``Write``).
FILE_TOOLS: Final[Mapping[str, str]] = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
#: Every tool the guard judges, in the order of the hook matcher ``Bash|Write|Edit|...``.
GUARDED_TOOLS: Final[tuple[str, ...]] = ("Bash", *FILE_TOOLS)

#: Commands that cannot write files by themselves, whatever their arguments (``find`` is read-only
#: only without :data:`FIND_ACTIONS`). Everything else counts as able to write, including readers
#: with a writing or command-running option (``tree -o``, ``less -o``, ``file -C``, ``rg --pre``,
#: ``sort -o``, ``sed``).
READ_ONLY_COMMANDS: Final[frozenset[str]] = frozenset(
    {
        ":", "[", "[[", "basename", "cat", "cd", "cksum", "cmp", "column", "cut", "date", "df",
        "diff", "dirname", "du", "echo", "egrep", "false", "fgrep", "find", "grep", "head", "id",
        "jq", "ls", "md5sum", "nl", "od", "popd", "printf", "pushd", "pwd", "readlink", "realpath",
        "sha1sum", "sha256sum", "sha512sum", "stat", "strings", "tac", "tail", "test", "tr", "true",
        "wc", "which", "whoami",
    }
)  # fmt: skip
#: ``find`` primaries that delete, run commands or write files.
FIND_ACTIONS: Final[frozenset[str]] = frozenset(
    {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
#: Shell words skipped before the command word of a simple command (``time`` runs the next word).
SKIPPED_KEYWORDS: Final[frozenset[str]] = shellwords.RESERVED_WORDS | {"time"}
#: Words that start a loop or case header: the header itself runs nothing.
HEADER_KEYWORDS: Final[frozenset[str]] = frozenset({"for", "select", "case", "function"})
#: Redirection targets that are not files.
SAFE_TARGETS: Final[frozenset[str]] = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})

_GLOB_CHARS: Final = frozenset("*?[")
#: How many command lines (the line itself, then ``$(...)``/backtick bodies at any depth) are
#: parsed; a line holding more counts as able to write.
_MAX_PARSED_TEXTS: Final = 64
_NAMES_PATTERN: Final = "|".join(re.escape(name) for name in sorted(GUARDED_NAMES, key=len, reverse=True))
_MENTION = re.compile(r"(?<![\w.-])(" + _NAMES_PATTERN + r")(?![\w.-])", re.IGNORECASE)
_BRACE = re.compile(r"\{([^{}]*,[^{}]*)\}")
_MAX_BRACE_EXPANSIONS: Final = 256
_MAX_RESOLVED_CHARS: Final = 4096
_FOLDED_NAMES: Final[frozenset[str]] = frozenset(name.casefold() for name in GUARDED_NAMES)


def deny(reason: str) -> dict[str, Any]:
    """Return the PreToolUse hook output that denies the call.

    Args:
        reason: Shown to the model as the tool result (hooks reference; observed with 2.1.197).

    Returns:
        ``{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": reason}}``.
    """
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def _guarded_component(path: str) -> str | None:
    for part in path.replace("\\", "/").split("/"):
        if part.casefold() in _FOLDED_NAMES:
            return part
    return None


def _resolve(path: str, cwd: str) -> str | None:
    if not path or len(path) > _MAX_RESOLVED_CHARS or "\x00" in path:
        return None
    expanded = os.path.expanduser(path) if path.startswith("~") else path
    try:
        return os.path.realpath(os.path.join(cwd, expanded))
    except (OSError, ValueError):
        return None


def guarded_name(path: str, cwd: str) -> str | None:
    """Return the guarded component a path names, as written or once resolved, or None.

    Args:
        path: A file path, absolute or relative to ``cwd`` (``~`` is expanded with ``HOME``).
        cwd: The directory relative paths start from.

    Returns:
        The first guarded component found (as spelled in the path), e.g. ``".claude"``, or None.
        The written path is checked first, then its real path (symlinks of existing components
        resolved, ``..`` applied), so a link to a guarded folder counts.
    """
    found = _guarded_component(path)
    if found is not None:
        return found
    resolved = _resolve(path, cwd)
    return _guarded_component(resolved) if resolved is not None else None


def _file_decision(tool: str, tool_input: Mapping[str, Any], cwd: str) -> dict[str, Any] | None:
    field = FILE_TOOLS[tool]
    path = tool_input.get(field)
    if not isinstance(path, str) or not path:
        return deny(f"Octipus shell guard: {tool} without a {field} cannot be checked, so it is refused.")
    name = guarded_name(path, cwd)
    if name is None:
        return None
    return deny(
        f"Octipus shell guard: {tool} of {path} is refused: it is inside a coding agent's configuration "
        f"({name}). Agents in a shared space never write .claude/, .codex/, .gemini/, .agents/, .vibe/, "
        ".mcp.json or .claude.json."
    )


# ---------------------------------------------------------------------------------- Bash


def _brace_expand(word: str) -> list[str]:
    words = [word]
    for _ in range(_MAX_BRACE_EXPANSIONS):
        index = next((i for i, w in enumerate(words) if _BRACE.search(w)), None)
        if index is None:
            break
        current = words.pop(index)
        match = _BRACE.search(current)
        assert match is not None
        head, tail = current[: match.start()], current[match.end() :]
        words[index:index] = [head + option + tail for option in match.group(1).split(",")]
        if len(words) > _MAX_BRACE_EXPANSIONS:
            break
    return words


def _pattern_mention(word: str, dotglob: bool) -> str | None:
    for expanded in _brace_expand(word) if "{" in word else [word]:
        for part in expanded.replace("\\", "/").split("/"):
            folded = part.casefold()
            if folded in _FOLDED_NAMES:
                return part
            if _GLOB_CHARS & set(part) and (dotglob or part.startswith(".")):
                for name in sorted(_FOLDED_NAMES):
                    if fnmatch.fnmatchcase(name, folded):
                        return part
    return None


def _word_mention(word: str, cwd: str, dotglob: bool) -> str | None:
    match = _MENTION.search(word)
    if match is not None:
        return match.group(1)
    found = _pattern_mention(word, dotglob)
    if found is not None:
        return found
    candidates = [word, *(word[i + 1 :] for i, c in enumerate(word) if c == "=")]
    for candidate in candidates:
        resolved = _resolve(candidate, cwd)
        if resolved is not None:
            name = _guarded_component(resolved)
            if name is not None:
                return name
    return None


def _holds_guarded(folder: str) -> bool:
    return any(os.path.lexists(os.path.join(folder, name)) for name in GUARDED_NAMES)


def _sweeps_guarded(target: str, cwd: str) -> bool:
    """Whether a recursive delete of ``target`` would reach a guarded entry (one level, or via cwd/HOME)."""
    resolved = _resolve(target, cwd)
    if resolved is None:
        return False
    if _holds_guarded(resolved):
        return True
    anchors = [os.path.realpath(cwd)]
    home = os.environ.get("HOME")
    if home:
        anchors.append(os.path.realpath(home))
    for anchor in anchors:
        inside = anchor == resolved or anchor.startswith(resolved.rstrip(os.sep) + os.sep)
        if inside and _holds_guarded(anchor):
            return True
    return False


def _sweep_targets(name: str, args: list[str]) -> list[str]:
    """Targets of a recursive delete by ``name`` with ``args``; empty when the command is not one."""
    if name == "rm":
        recursive = any(
            a in ("--recursive", "-r", "-R")
            or (a.startswith("-") and not a.startswith("--") and set(a[1:]) & {"r", "R"})
            for a in args
        )
        if not recursive:
            return []
        targets: list[str] = []
        options_done = False
        for a in args:
            if a == "--" and not options_done:
                options_done = True
            elif options_done or not a.startswith("-"):
                targets.append(a)
        return targets
    if name == "find" and FIND_ACTIONS & set(args):
        starts = []
        for a in args:
            if a.startswith(("-", "(", "!")):
                break
            starts.append(a)
        return starts or ["."]
    if name == "git" and "clean" in args:
        return ["."]
    if name == "rsync" and any(a.startswith("--delete") for a in args):
        operands = [a for a in args if not a.startswith("-")]
        return operands[-1:]
    return []


def _simple_commands(command: str) -> tuple[list[shellwords.SimpleCommand], bool]:
    """Split a Bash command line into its simple commands, those of its substitutions included.

    Conservative reading (:func:`shellwords.parse` with ``comments=False, heredocs=False``):
    comment text and heredoc body lines stay in the line and are split as commands; the body of
    every ``$(...)``/backtick substitution, at any depth, is split too (up to
    :data:`_MAX_PARSED_TEXTS` texts).

    Args:
        command: The ``tool_input.command`` text.

    Returns:
        ``(commands, complete)``: the simple commands (the line's, then each substitution's, in
        the order found), and False when some substitution bodies were left unparsed.

    Raises:
        ValueError: When a text cannot be split (an unclosed quote).
    """
    texts, commands = [command], []
    for _ in range(_MAX_PARSED_TEXTS):
        if not texts:
            break
        parsed = shellwords.parse(texts.pop(0), comments=False, heredocs=False, strict=True)
        commands.extend(parsed.commands)
        texts.extend(parsed.substitutions)
    return commands, not texts


def _writes_file(redirect: shellwords.Redirect) -> bool:
    """Whether an output redirection writes a file (not ``/dev/null``, a ``/dev/fd/N`` or an fd copy)."""
    if ">" not in redirect.operator:
        return False
    target = redirect.target
    fd_dup = redirect.operator.endswith("&") and (target.isdigit() or target == "-")
    return not fd_dup and target not in SAFE_TARGETS and not target.startswith("/dev/fd/")


def _command_writes(words: list[str]) -> bool:
    """Whether a simple command (its words) can write files: anything but a read-only command."""
    index = shellwords.command_index(words, SKIPPED_KEYWORDS)
    if index >= len(words):
        return False
    word = words[index]
    if word in HEADER_KEYWORDS:
        return False
    name = os.path.basename(word)
    if name not in READ_ONLY_COMMANDS:
        return True
    return name == "find" and bool(FIND_ACTIONS & set(words[index + 1 :]))


def command_decision(command: str, cwd: str) -> dict[str, Any] | None:
    """Judge one Bash command line (see the module docstring for the rule).

    Args:
        command: The ``tool_input.command`` text.
        cwd: The Bash tool's current directory (the hook input's ``cwd``).

    Returns:
        A deny output (:func:`deny`) naming the guarded path and why, or None (no opinion).
    """
    raw_mention = _MENTION.search(command)
    try:
        commands, complete = _simple_commands(command)
    except ValueError:
        if raw_mention is None:
            return None
        return deny(
            f"Octipus shell guard: this command mentions {raw_mention.group(1)} (a coding agent's "
            "configuration) and cannot be parsed safely, so it is refused. Agents in a shared space never "
            "write .claude/, .codex/, .gemini/, .agents/, .vibe/, .mcp.json or .claude.json."
        )
    writes_file = not complete or any(_writes_file(r) for simple in commands for r in simple.redirects)
    dotglob = "dotglob" in command or "GLOBIGNORE" in command
    mention: str | None = raw_mention.group(1) if raw_mention is not None else None
    words = [word for simple in commands for word in (*simple.words, *(r.target for r in simple.redirects))]
    for word in words:
        if mention is not None:
            break
        mention = _word_mention(word, cwd, dotglob)
    if mention is None:
        for simple in commands:
            index = shellwords.command_index(simple.words, frozenset())
            if index < len(simple.words):
                name = os.path.basename(simple.words[index])
                if any(_sweeps_guarded(t, cwd) for t in _sweep_targets(name, simple.words[index + 1 :])):
                    mention = f"a folder holding {', '.join(sorted(GUARDED_NAMES))}"
                    break
    if mention is None:
        return None
    if not (writes_file or any(_command_writes(simple.words) for simple in commands)):
        return None
    return deny(
        f"Octipus shell guard: this command mentions {mention} (a coding agent's configuration) and can "
        "write files, so it is refused. Agents in a shared space never write .claude/, .codex/, .gemini/, "
        ".agents/, .vibe/, .mcp.json or .claude.json. To only read such a file, run a read-only command "
        "(cat, ls, grep) on its own, without redirections or other commands."
    )


def guard_decision(hook_input: Mapping[str, Any]) -> dict[str, Any] | None:
    """Decide one PreToolUse hook input.

    Args:
        hook_input: The hook's stdin object: ``tool_name`` (str), ``tool_input`` (object), ``cwd``
            (the call's directory; the guard's own working directory when absent), and optionally
            ``hook_event_name``.

    Returns:
        The hook output denying the call (:func:`deny`) when it would write a coding agent's
        configuration, or cannot be checked; None when the guard has no opinion (another event, a
        tool it does not judge, or a harmless call): the normal permission flow continues.
    """
    event = hook_input.get("hook_event_name", "PreToolUse")
    if event != "PreToolUse":
        return None
    tool = hook_input.get("tool_name")
    if not isinstance(tool, str) or tool not in GUARDED_TOOLS:
        return None
    cwd_value = hook_input.get("cwd")
    cwd = cwd_value if isinstance(cwd_value, str) and os.path.isabs(cwd_value) else os.getcwd()
    tool_input = hook_input.get("tool_input")
    if not isinstance(tool_input, Mapping):
        return deny(
            f"Octipus shell guard: {tool} without a tool_input object cannot be checked, so it is refused."
        )
    if tool == "Bash":
        command = tool_input.get("command")
        if not isinstance(command, str):
            return deny(
                "Octipus shell guard: Bash without a command string cannot be checked, so it is refused."
            )
        return command_decision(command, cwd)
    return _file_decision(tool, tool_input, cwd)


def _read_input(text: str) -> Mapping[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"hook input is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    if not isinstance(value, dict):
        raise ValueError(f"hook input must be a JSON object, got {type(value).__name__}")
    if not isinstance(value.get("tool_name"), str):
        raise ValueError("hook input has no tool_name string")
    return value


def main(
    argv: Iterable[str] = (),
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the guard as a Claude Code command hook (``octipus-bridge shell-guard``).

    Reads one hook input JSON object from stdin and prints the decision JSON (or nothing) on stdout.

    Args:
        argv: Extra arguments; none are accepted.
        stdin: Input stream (default ``sys.stdin``).
        stdout: Output stream (default ``sys.stdout``).
        stderr: Error stream (default ``sys.stderr``).

    Returns:
        0 after printing a decision or nothing; 2 (Claude's blocking exit code) with a message on
        stderr when the input is not a JSON object with a ``tool_name`` string, an argument was given,
        or the guard failed unexpectedly, so an unreadable call is refused rather than let through.
    """
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    extra = list(argv)
    if extra:
        print(f"octipus shell guard: unexpected arguments {extra!r}", file=stderr)
        return 2
    try:
        decision = guard_decision(_read_input(stdin.read()))
    except ValueError as exc:
        print(f"octipus shell guard: {exc}; the call is refused", file=stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - fail closed: an unexpected error blocks the call, with its traceback
        # The hook runs in Claude's process tree with no log of its own: its stderr is the record.
        traceback.print_exc(file=stderr)
        print(
            f"octipus shell guard: internal error {type(exc).__name__}: {exc}; the call is refused",
            file=stderr,
        )
        return 2
    if decision is not None:
        stdout.write(json.dumps(decision, ensure_ascii=False) + "\n")
        stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
