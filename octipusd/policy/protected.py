"""The daemon's private files, out of the agents' reach: refused before any rule (defence in depth).

The daemon keeps its vault key, its database, its settings file and its socket on the machine the
agents work on, as the same user. The built-in rules allow native reads anywhere (``Read``,
``Grep``, ``Glob``...), so without this check an agent (or a prompt injection) could read the key and
the database and decrypt every vault entry. :class:`ProtectedPaths` refuses, before the rules (no
rule, grant or approval can allow it), a tool call of any kind (``cli-native:<Tool>`` of any vendor,
``shell__run``, a connector tool) when:

* a path argument (:data:`PATH_FIELDS`, at any depth: Codex's ``changes`` list holds ``path``
  entries) resolves inside a protected path: ``~`` and ``$HOME`` expanded, a relative path taken from
  the call's ``cwd`` or the workspace, ``..`` and symlinks resolved;
* a recursive search (:data:`RECURSIVE_SEARCH_TOOLS`) starts in a folder that holds a protected
  path: its ``path`` (the workspace when absent), or the fixed leading folders of a ``Glob``
  ``pattern``. Whether the pattern could match the protected files is not judged (``**/*`` does,
  ``*.py`` does not, a vendor's search may or may not enter hidden folders): the call is refused and
  the message says to search a folder that does not hold the daemon's data;
* a command string (``command`` of Bash, ``shell__run``, Codex's command execution) names a
  protected path: as text (absolute, ``~/``- or ``$HOME/``-relative, the path as configured or with
  its symlinks resolved), or as a word that resolves inside one from the command's folder.

A protected folder that holds the call's workspace (an agent working inside the data folder) is not
refused as a whole, or every call of that workspace would be; the files listed on their own (the
vault key files, the database) stay refused.

This is not isolation: the vendor CLI runs as the daemon's user, and a command that builds the path
at run time (``cat $(echo ...)``, a script) still reads the file. The shell sandbox masks the data
folder from Octipus's shell commands; real isolation keeps the daemon's data on an account the agent
does not control (README "What the vault does not protect against").
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from octipusd.policy.shellwords import is_operator, tokens

__all__ = ["PATH_FIELDS", "RECURSIVE_SEARCH_TOOLS", "ProtectedPaths"]

#: Argument names whose value is a path or a list of paths, in every vendor's native tools and
#: Octipus's (Claude's ``file_path``/``notebook_path``/``path``, Codex's ``cwd`` and ``changes[].path``...).
PATH_FIELDS: Final = frozenset(
    {
        "path",
        "paths",
        "file_path",
        "file_paths",
        "filePath",
        "filePaths",
        "notebook_path",
        "absolute_path",
        "dir_path",
        "directory",
        "cwd",
        "workdir",
        "target_file",
    }
)
#: Argument names whose value is a shell command.
COMMAND_FIELDS: Final = frozenset({"command"})
#: Native tools (Claude's names, a vendor's mapped through its ``tool_aliases``) that search a
#: folder recursively.
RECURSIVE_SEARCH_TOOLS: Final = frozenset({"Grep", "Glob"})
#: How deeply nested arguments are looked into for path fields (a list of changes is depth 2).
MAX_ARGUMENT_DEPTH: Final = 4
#: Characters that make a path component a glob pattern.
_GLOB_CHARS: Final = frozenset("*?[{")
#: Characters that continue a path name: a protected path named in a command must not be followed
#: (or, for its first character, preceded) by one of them.
_NAME = r"[\w.~-]"


def _inside(path: str, folder: str) -> bool:
    """Whether the resolved ``path`` is ``folder`` or inside it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@dataclass(frozen=True)
class _Guarded:
    """One protected path: as given (its name in messages), resolved, and its forms in a command."""

    given: str
    real: str
    pattern: re.Pattern[str]


def _text_forms(path: str, home: str) -> set[str]:
    """How a command may spell ``path``: itself, and ``~/``, ``$HOME/``, ``${HOME}/`` forms under home."""
    forms = {path}
    if home and home != "/" and _inside(path, home) and path != home:
        rest = path[len(home.rstrip("/")) + 1 :]
        forms |= {f"~/{rest}", f"$HOME/{rest}", f"${{HOME}}/{rest}"}
    return forms


@dataclass(frozen=True)
class ProtectedPaths:
    """The daemon's private paths and the check of a call against them (see the module docstring).

    Attributes:
        paths: Absolute paths: the data folder, the vault key files, the database files, the
            settings file, the socket folder, ``$CREDENTIALS_DIRECTORY``. Empty: nothing is refused.
        home: The agents' home folder (``~`` and ``$HOME``): the daemon's, which its vendors inherit.
    """

    paths: tuple[Path, ...] = ()
    home: str = field(default_factory=lambda: os.path.expanduser("~"))
    _guarded: tuple[_Guarded, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        guarded: dict[str, _Guarded] = {}
        home = os.path.realpath(self.home) if self.home else ""
        for path in self.paths:
            given, real = str(path), os.path.realpath(path)
            forms = _text_forms(given, self.home) | _text_forms(real, home)
            alternatives = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
            pattern = re.compile(rf"(?<!{_NAME})(?:{alternatives})(?!{_NAME})")
            guarded.setdefault(real, _Guarded(given, real, pattern))
        object.__setattr__(self, "_guarded", tuple(guarded.values()))

    def _in_force(self, workspace: str) -> list[_Guarded]:
        """The protected paths for a call in ``workspace``: all but the folders holding it."""
        root = os.path.realpath(workspace)
        return [g for g in self._guarded if not _inside(root, g.real)]

    def resolve(self, value: str, base: str) -> str:
        """``value`` as an absolute path with symlinks resolved: ``~``/``$HOME`` expanded, a relative
        path taken from ``base``."""
        for prefix in ("~", "$HOME", "${HOME}"):
            if value == prefix or value.startswith(prefix + "/"):
                value = self.home + value[len(prefix) :]
                break
        return os.path.realpath(os.path.join(base, value))

    def refusal(self, tool: str, arguments: Mapping[str, Any], workspace: str) -> str | None:
        """Why the call may not run, naming the protected path, or None when it touches none.

        Args:
            tool: The tool id as the flow guard names it (``cli-native:Read``; a vendor's native
                name already mapped to Claude's), or an Octipus tool id (``shell__run``).
            arguments: The call's input.
            workspace: The call's workspace (relative paths and a relative ``cwd`` start there).
        """
        guarded = self._in_force(workspace)
        if not guarded:
            return None
        cwd = arguments.get("cwd")
        base = os.path.join(workspace, cwd) if isinstance(cwd, str) and cwd else workspace
        for value in _path_values(arguments, 0):
            hit = self._hit(self.resolve(value, base), guarded)
            if hit is not None:
                return _message(f"{tool} of {value}", hit)
        name = tool.rsplit(":", 1)[-1]
        if name in RECURSIVE_SEARCH_TOOLS:
            root = self.resolve(_search_root(arguments), base)
            for g in guarded:
                if _inside(g.real, root):
                    return _message(
                        f"{tool} searches {root} recursively, which holds {g.given}",
                        g,
                        "; search a folder that does not hold it",
                    )
        for key in COMMAND_FIELDS:
            command = arguments.get(key)
            if isinstance(command, list):
                command = " ".join(str(word) for word in command)
            if isinstance(command, str) and command:
                hit = self._command_hit(command, base, guarded)
                if hit is not None:
                    return _message(f"the command of {tool} names a protected path", hit)
        return None

    def _hit(self, real: str, guarded: Iterable[_Guarded]) -> _Guarded | None:
        return next((g for g in guarded if _inside(real, g.real)), None)

    def _command_hit(self, command: str, base: str, guarded: list[_Guarded]) -> _Guarded | None:
        """The protected path ``command`` names as text, or through a word resolving inside it."""
        for g in guarded:
            if g.pattern.search(command):
                return g
        for word in _words(command):
            hit = self._hit(self.resolve(word, base), guarded)
            if hit is not None:
                return hit
        return None


def _message(what: str, hit: _Guarded, hint: str = "") -> str:
    """The refusal of a call (``what`` it does) that reaches ``hit``."""
    return (
        f"refused: {what}; {hit.given} is the Octipus daemon's private data (its vault key, database, "
        "settings or socket), which agents never read or change; no rule, grant or approval allows it" + hint
    )


def _path_values(arguments: Mapping[str, Any], depth: int) -> Iterator[str]:
    """Every string under a :data:`PATH_FIELDS` key of ``arguments`` (nested up to the limit)."""
    if depth > MAX_ARGUMENT_DEPTH:
        return
    for key, value in arguments.items():
        items = value if isinstance(value, list) else [value]
        for item in items:
            if key in PATH_FIELDS and isinstance(item, str) and item:
                yield item
            elif isinstance(item, Mapping):
                yield from _path_values(item, depth + 1)


def _search_root(arguments: Mapping[str, Any]) -> str:
    """Where a recursive search starts: its ``path`` joined with a ``Glob`` pattern's fixed leading
    folders (``/etc/**/x`` -> ``/etc``); ``.`` (the call's folder) when neither is given."""
    path = arguments.get("path")
    root = path if isinstance(path, str) and path else "."
    pattern = arguments.get("pattern")
    if isinstance(pattern, str) and "/" in pattern:
        fixed: list[str] = []
        for part in pattern.split("/")[:-1]:
            if any(c in _GLOB_CHARS for c in part):
                break
            fixed.append(part)
        if fixed:
            prefix = "/".join(fixed) or "/"
            root = prefix if prefix.startswith(("/", "~", "$HOME")) else os.path.join(root, prefix)
    return root


def _words(command: str) -> list[str]:
    """The words of ``command`` (shell quoting removed, operators left out, ``--opt=value`` as
    ``value``), split by the policy's shell tokenizer (:func:`~octipusd.policy.shellwords.tokens`)."""
    words = (word.rsplit("=", 1)[-1] for word in tokens(command) if not is_operator(word))
    return [word for word in words if word]
