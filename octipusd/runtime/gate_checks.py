"""What a gate command needs from its environment, checked before it runs (:mod:`octipusd.runtime.gates`).

The child's tree must be there; an explicit directory switch of git, make, pnpm, npm or yarn must
stay inside it and name something that exists (checked again against the real tree, after the
spawn-time check of :mod:`octipusd.policy.dirswitch`); the programs a command starts must be on
the shell tool's PATH. A problem found here is an environment failure, never the child's to fix.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

from octipusd.policy.dirswitch import directory_switches, needs_expansion
from octipusd.policy.shellwords import WRAPPERS, command_index, command_name, parse, unwrap, wordset
from octipusd.tools.shell_command import base_environment

__all__ = ["missing_program", "switch_problem", "tree_root"]

#: Shell builtins a command may start that are no program on PATH.
_BUILTINS = wordset(
    ": . [ alias bg break cd command continue echo eval exec exit export false fc fg getopts hash "
    "jobs kill local newgrp printf pwd read readonly return set shift source test times trap true "
    "type ulimit umask unalias unset wait"
)
#: A shell function definition (``name()``): its name is no program either.
_FUNCTION = re.compile(r"[\w-]+\s*\(\s*\)")


def tree_root(tree: Path) -> tuple[Path | None, str]:
    """``(the tree resolved, "")``, or ``(None, why it is unavailable)``."""
    try:
        root = tree.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        return None, f"the child's tree {tree} is not available ({exc.__class__.__name__}: {exc})"
    if not root.is_dir():
        return None, f"the child's tree {tree} is not a directory"
    return root, ""


def switch_problem(command: str, root: Path) -> str | None:
    """Why an explicit directory switch of ``command`` cannot be used in ``root``, or None."""
    for switch in directory_switches(command):
        if needs_expansion(switch.path):
            return f"{switch.spelling!r}: the shell expands it, so it cannot be checked to stay in the child's tree"
        try:
            target = (root / os.path.expanduser(switch.path)).resolve()
        except (OSError, RuntimeError) as exc:
            return f"{switch.spelling!r}: {switch.path} cannot be resolved ({exc})"
        if target != root and not target.is_relative_to(root):
            return f"{switch.spelling!r} points outside the child's tree {root}"
        if not (target.is_dir() if switch.directory else target.exists()):
            return f"{switch.spelling!r}: {switch.path} is not available in the child's tree {root}"
    return None


def _programs(command: str) -> Iterator[str]:
    """The command words of ``command``'s own simple commands, with the commands wrappers such as
    ``timeout 60 pnpm test`` start (not ``python -m MODULE``: a module is no program)."""
    for simple in parse(command).commands:
        words: Sequence[str] = simple.words
        while (index := command_index(words)) < len(words):
            name = command_name(words[index])
            yield words[index]
            inner = unwrap(name, words[index + 1 :]) if name in WRAPPERS else None
            if not inner:
                break
            words = inner


def missing_program(command: str) -> str | None:
    """The first program ``command`` starts that is not on the shell's PATH, as a reason, or None.

    A line that sets PATH or defines a shell function is not checked (its names are the shell's).
    """
    if "PATH" in command or _FUNCTION.search(command):
        return None
    path = base_environment().get("PATH", os.defpath)
    for word in _programs(command):
        if "/" in word or needs_expansion(word) or word in _BUILTINS:
            continue
        if shutil.which(word, path=path) is None:
            return f"{word} is not installed here (not on the PATH the shell tool uses)"
    return None
