"""What a new worktree gets besides git's checkout (FACTS.md §1, "node_modules"; issue 15 item 4).

``node_modules``: one symlink to the project's, ignored through the common ``info/exclude``.
``.worktreeinclude``: untracked files matching its patterns (gitignore syntax, matched by git
itself) that the project also ignores are copied to the same relative path.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Final

from .git import Git

__all__ = ["EXCLUDE_COMMENT", "INCLUDE_FILE", "copy_included", "link_node_modules"]

#: The file at the repository root listing the untracked files each new worktree gets a copy of.
INCLUDE_FILE: Final = ".worktreeinclude"
#: The comment written once above ``/node_modules`` in the common exclude file.
EXCLUDE_COMMENT: Final = "# Octipus: worktrees link node_modules to the project's"
_PATTERN: Final = "/node_modules"


def link_node_modules(project: Path, worktree: Path, git: Git) -> bool:
    """Symlink ``<worktree>/node_modules`` to ``<project>/node_modules`` and keep git blind to it.

    Made only when the project has a ``node_modules`` directory and the worktree has none. When
    git does not already ignore it, :data:`EXCLUDE_COMMENT` and ``/node_modules`` are appended
    once to the file ``git rev-parse --git-path info/exclude`` names; if it is still not ignored
    the symlink is removed again. ``git`` runs in ``worktree``.

    Returns:
        Whether the symlink is there (and ignored) afterwards.

    Raises:
        WorktreeError: git could not run or timed out.
    """
    source, link = project / "node_modules", worktree / "node_modules"
    if not source.is_dir() or link.exists() or link.is_symlink():
        return False
    try:
        link.symlink_to(source, target_is_directory=True)
    except OSError:
        return False
    if not _ignored(git, "node_modules"):
        _exclude_once(worktree / git.read("rev-parse", "--git-path", "info/exclude").strip())
        if not _ignored(git, "node_modules"):
            link.unlink()
            return False
    return True


def _ignored(git: Git, path: str) -> bool:
    return git.run("check-ignore", "-q", "--", path).ok


def _exclude_once(exclude: Path) -> None:
    """Append the comment and ``/node_modules`` unless the line is already there."""
    try:
        text = exclude.read_text(encoding="utf-8") if exclude.is_file() else ""
    except (OSError, UnicodeDecodeError):
        return
    if _PATTERN in (line.strip() for line in text.splitlines()):
        return
    prefix = "" if not text or text.endswith("\n") else "\n"
    try:
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with exclude.open("a", encoding="utf-8") as out:
            out.write(f"{prefix}{EXCLUDE_COMMENT}\n{_PATTERN}\n")
    except OSError:
        return


def copy_included(project: Path, worktree: Path, git: Git) -> tuple[str, ...]:
    """Copy the project's ignored files matching ``.worktreeinclude`` into ``worktree``.

    A matched file the project's own ignore rules (``.gitignore``, ``info/exclude``, the user's
    excludes file) do not cover is not copied: the finish commits everything not ignored, so it
    would end up on the child's branch and, merged, in the project's history.

    Git lists them (``ls-files --others --ignored --exclude-from``, so the syntax is git's own
    and tracked files never match). A file whose real path leaves the project, or whose
    destination would leave the worktree or already exists, is skipped; so is one that cannot
    be read or written. ``git`` runs in ``project``.

    Returns:
        The relative paths copied, sorted.

    Raises:
        WorktreeError: git could not run, timed out, or rejected the include file.
    """
    if not (project / INCLUDE_FILE).is_file() or (project / INCLUDE_FILE).is_symlink():
        return ()
    listing = git.read("ls-files", "-z", "--others", "--ignored", f"--exclude-from={INCLUDE_FILE}")
    # only files git itself ignores: a matched file the project does not ignore would be committed
    # on the child's branch at finish (``add -A``) and merged into the project's history
    ignored = set(git.read("ls-files", "-z", "--others", "--ignored", "--exclude-standard").split("\0"))
    top, dest_top = project.resolve(), worktree.resolve()
    copied: list[str] = []
    for name in sorted(n for n in listing.split("\0") if n and n in ignored):
        source, dest = project / name, worktree / name
        if not source.resolve().is_relative_to(top) or not source.is_file():
            continue
        if dest.exists() or dest.is_symlink() or not dest.parent.resolve().is_relative_to(dest_top):
            continue
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            if not dest.parent.resolve().is_relative_to(dest_top):
                continue
            shutil.copy2(source, dest)
        except OSError:
            continue
        copied.append(name)
    return tuple(copied)
