"""Explicit directory switches of ``git``, ``make``, ``pnpm``, ``npm`` and ``yarn`` in a command line.

Seed 003 ("Permissions and limits", command scorers): a child's gate commands run in the child's
own tree, and explicit directory switches of pnpm, npm, yarn, git and make that point outside it
are checked before dispatch and again before verification (``pnpm test`` rather than
``pnpm -C /host/repo test``: a host path may not be mounted, and an isolated child may work in
another worktree).

Pure: no I/O. :func:`directory_switches` reads a line with the shell guard's parser
(:func:`octipusd.policy.shellwords.walk`, nested ``$(...)``, ``sh -c`` and ``eval`` included, down
to :data:`SWITCH_DEPTH`) and finds each tool's own switches:

* ``git``: its global options before the subcommand: ``-C DIR`` (each later relative ``-C``
  is relative to the one before, as git reads them), ``--git-dir[=]DIR`` and
  ``--work-tree[=]DIR`` (relative to the ``-C`` before them); ``git log -C`` (copy detection)
  is not a switch;
* ``make``: ``-C DIR``, ``-CDIR``, ``-C`` inside a bundle of short options (``-sC DIR``) and
  ``--directory[=]DIR`` with its unambiguous abbreviations (``--dir=DIR``), anywhere before
  ``--``; successive ``-C`` compose like git's;
* ``pnpm``: ``-C DIR`` / ``-C=DIR`` and ``--dir[=]DIR``; ``npm``: ``--prefix[=]DIR`` and
  ``-C DIR`` (npm's shorthand of ``--prefix``); ``yarn``: ``--cwd[=]DIR``; each anywhere before
  ``--``.

:func:`lexical_problem` judges a switch without knowing the tree (the child's tree is chosen
later): an absolute path, a ``~`` path and a ``..`` that climbs out are outside; a word the shell
would expand (``$VAR``, ``$(...)``, a glob) cannot be checked, so it is refused too. The runtime
checks the switches again against the real tree before it runs a gate
(:mod:`octipusd.runtime.gates`). ``cd DIR && ...`` and other tools' switches are not looked at.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from octipusd.policy.shellwords import SUBSTITUTION_WORD, walk

__all__ = [
    "SWITCH_DEPTH",
    "SWITCH_TOOLS",
    "DirectorySwitch",
    "directory_switches",
    "first_refusal",
    "lexical_problem",
    "needs_expansion",
]

#: The tools whose directory switches are read.
SWITCH_TOOLS: Final = frozenset({"git", "make", "pnpm", "npm", "yarn"})
#: How deeply ``$(...)``, ``sh -c`` and ``eval`` are looked into (as the permission rules do).
SWITCH_DEPTH: Final = 3

#: git global options whose value is the next word (skipped: they are not directory switches).
_GIT_VALUE_OPTIONS: Final = frozenset({"-c", "--namespace", "--config-env", "--super-prefix"})
#: git global options naming a directory (or, for ``--git-dir``, a gitfile).
_GIT_DIR_OPTIONS: Final = ("--git-dir", "--work-tree")
#: make short options whose value follows them (in the same word or the next one).
_MAKE_SHORT_VALUES: Final = frozenset("fIoWEC")
#: make long options whose value may be the next word (exact spellings).
_MAKE_LONG_VALUES: Final = frozenset(
    {"--file", "--makefile", "--include-dir", "--old-file", "--assume-old", "--new-file", "--assume-new",
     "--what-if", "--eval"}
)  # fmt: skip
#: The shortest abbreviation GNU make accepts for ``--directory`` (``--d`` is also ``--debug``).
_MAKE_DIRECTORY_MIN: Final = len("--di")
#: Per tool: ``(short switches, long switches)`` that name a directory, for pnpm, npm and yarn.
_PACKAGE_SWITCHES: Final = {
    "pnpm": (frozenset({"-C"}), frozenset({"--dir"})),
    "npm": (frozenset({"-C"}), frozenset({"--prefix"})),
    "yarn": (frozenset(), frozenset({"--cwd"})),
}
#: Characters of a word the shell would expand (so where it points is known only when it runs).
_EXPANDING: Final = frozenset("$`*?[") | {SUBSTITUTION_WORD[0]}


@dataclass(frozen=True)
class DirectorySwitch:
    """One explicit directory switch of a command.

    Attributes:
        tool: ``git``, ``make``, ``pnpm``, ``npm`` or ``yarn``.
        spelling: The switch as written, for messages (``"pnpm -C /host/repo"``).
        path: Where it switches to, relative to the command's working directory unless absolute,
            composed with the same command's earlier switches where the tool composes them
            (``git -C a -C b`` -> ``a/b``).
        directory: True when ``path`` must be a directory; False for ``git --git-dir``, which may
            name a gitfile.
    """

    tool: str
    spelling: str
    path: str
    directory: bool = True


def directory_switches(command: str) -> list[DirectorySwitch]:
    """Every explicit directory switch of the five tools in ``command`` (see the module docstring).

    Args:
        command: A shell command line.

    Returns:
        The switches in the order the line runs them (nested ones first, as
        :func:`~octipusd.policy.shellwords.walk` yields them); empty when there is none.
    """
    found: list[DirectorySwitch] = []
    for cmd in walk(command, max_depth=SWITCH_DEPTH):
        if cmd.name == "git":
            found.extend(_git(cmd.args))
        elif cmd.name == "make":
            found.extend(_make(cmd.args))
        elif cmd.name in _PACKAGE_SWITCHES:
            found.extend(_package(cmd.name, cmd.args))
    return found


def needs_expansion(path: str) -> bool:
    """Whether the shell would expand ``path`` (a variable, a substitution, a glob pattern)."""
    return any(char in _EXPANDING for char in path)


def lexical_problem(path: str) -> str | None:
    """Why ``path`` points outside a tree it is relative to, judged from its text alone.

    Args:
        path: A switch's :attr:`DirectorySwitch.path`.

    Returns:
        None for a relative path that stays inside; else why not: an absolute path, a home path
        (``~``), a ``..`` that climbs out, or a shell expansion that cannot be checked before the
        command runs.
    """
    if needs_expansion(path):
        return "the shell expands it, so it cannot be checked to stay inside the child's tree"
    if path.startswith("~"):
        return "a home directory path (~), outside the child's tree"
    if posixpath.isabs(path):
        return "an absolute path, outside the child's tree"
    normal = posixpath.normpath(path)
    if normal == ".." or normal.startswith("../"):
        return "'..' climbs out of the child's tree"
    return None


def first_refusal(command: str) -> str | None:
    """The refusal of the first switch of ``command`` that :func:`lexical_problem` rejects, or None.

    Returns:
        E.g. ``"'pnpm -C /host/repo': an absolute path, outside the child's tree"``; None when
        every switch stays inside (or there is none).
    """
    for switch in directory_switches(command):
        problem = lexical_problem(switch.path)
        if problem is not None:
            return f"{switch.spelling!r}: {problem}"
    return None


def _join(base: str | None, path: str) -> str:
    """``path`` relative to ``base`` (a switch composed with the one before it)."""
    if base is None or posixpath.isabs(path) or path.startswith("~"):
        return path
    return posixpath.join(base, path) if path else base


def _git(args: Sequence[str]) -> Iterator[DirectorySwitch]:
    """git's global directory switches, up to its subcommand."""
    base: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        value = args[i + 1] if i + 1 < len(args) else ""
        if arg == "-C":
            base = _join(base, value)
            yield DirectorySwitch("git", f"git -C {value}", base)
            i += 2
            continue
        name, eq, attached = arg.partition("=")
        if name in _GIT_DIR_OPTIONS:
            path = attached if eq else value
            yield DirectorySwitch("git", f"git {name} {path}", _join(base, path), name != "--git-dir")
            i += 1 if eq else 2
        elif arg in _GIT_VALUE_OPTIONS:
            i += 2
        elif arg.startswith("-"):
            i += 1
        else:
            return  # the subcommand: its own -C means something else (git log -C)


def _make(args: Sequence[str]) -> Iterator[DirectorySwitch]:
    """make's ``-C`` / ``--directory`` switches, composed, before ``--``."""
    base: str | None = None
    i = 0
    while i < len(args):
        arg, following = args[i], (args[i + 1] if i + 1 < len(args) else "")
        i += 1
        if arg == "--":
            return
        path: str | None = None
        used_next = False
        if arg.startswith("--"):
            name, eq, attached = arg.partition("=")
            if len(name) >= _MAKE_DIRECTORY_MIN and "--directory".startswith(name):
                path, used_next = (attached, False) if eq else (following, True)
            elif name in _MAKE_LONG_VALUES and not eq:
                used_next = True
        elif arg.startswith("-") and len(arg) > 1:
            path, used_next = _make_bundle(arg, following)
        i += 1 if used_next else 0
        if path is not None:
            base = _join(base, path)
            yield DirectorySwitch("make", f"make {arg} {following}" if used_next else f"make {arg}", base)


def _make_bundle(arg: str, following: str) -> tuple[str | None, bool]:
    """Read a bundle of make's short options: ``(the -C directory or None, the next word used)``."""
    for j in range(1, len(arg)):
        if arg[j] in _MAKE_SHORT_VALUES:
            attached = arg[j + 1 :]
            value = attached or following
            return (value if arg[j] == "C" else None), not attached
    return None, False


def _package(tool: str, args: Sequence[str]) -> Iterator[DirectorySwitch]:
    """pnpm's, npm's and yarn's directory switches, each relative to the working directory."""
    short, long = _PACKAGE_SWITCHES[tool]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return
        name, eq, attached = arg.partition("=")
        if name in short or name in long:
            path = attached if eq else (args[i + 1] if i + 1 < len(args) else "")
            yield DirectorySwitch(tool, f"{tool} {name} {path}", path)
            i += 1 if eq else 2
            continue
        i += 1
