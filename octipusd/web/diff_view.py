"""A unified diff (``git diff`` text) parsed into files, hunks and numbered lines for the page's
diff view; pure, so the page and its tests share one reading of a diff."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = ["DiffFile", "DiffHunk", "DiffLine", "parse_diff"]

_HUNK: Final = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$")
_GIT_HEADER: Final = re.compile(r"^diff --git a/(.*) b/(.*)$")
#: How the worktree library's note on a diff cut at its size limit starts (``kept.diff``).
_CUT_NOTE: Final = "[diff cut at "

LineKind = Literal["add", "del", "ctx", "note"]


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One line of a hunk: ``old``/``new`` its line numbers in the old and new file (None where it
    has none: an added line has no old number), ``text`` without its ``+``/``-``/`` `` marker."""

    kind: LineKind
    text: str
    old: int | None
    new: int | None


@dataclass(slots=True)
class DiffHunk:
    """One ``@@`` hunk: its header and lines."""

    header: str
    lines: list[DiffLine] = field(default_factory=list)


@dataclass(slots=True)
class DiffFile:
    """One file of the diff: its path (the new path; the old one for a deletion), the extended
    header lines git printed (mode, rename, index, binary...), and its hunks."""

    path: str
    old_path: str
    headers: list[str] = field(default_factory=list)
    hunks: list[DiffHunk] = field(default_factory=list)

    @property
    def added(self) -> int:
        return sum(1 for h in self.hunks for line in h.lines if line.kind == "add")

    @property
    def removed(self) -> int:
        return sum(1 for h in self.hunks for line in h.lines if line.kind == "del")


def _path(line: str, prefix: str) -> str | None:
    name = line[len(prefix) :].split("\t", 1)[0]
    if name == "/dev/null":
        return None
    return name[2:] if name[:2] in ("a/", "b/") else name


def parse_diff(text: str) -> tuple[list[DiffFile], list[str]]:
    """Split ``git diff`` output into files; returns them and the lines outside any file (a note
    such as the library's "diff cut at N characters" line)."""
    files: list[DiffFile] = []
    stray: list[str] = []
    current: DiffFile | None = None
    hunk: DiffHunk | None = None
    old = new = 0
    for line in text.splitlines():
        header = _GIT_HEADER.match(line)
        if line.startswith(_CUT_NOTE):
            stray.append(line)
            hunk = None
            continue
        if header:
            current = DiffFile(path=header.group(2), old_path=header.group(1))
            files.append(current)
            hunk = None
            continue
        if current is None:
            if line.strip():
                stray.append(line)
            continue
        match = _HUNK.match(line)
        if match:
            old, new = int(match.group(1)), int(match.group(2))
            hunk = DiffHunk(header=line)
            current.hunks.append(hunk)
        elif hunk is None:
            if line.startswith("--- "):
                current.old_path = _path(line, "--- ") or current.old_path
            elif line.startswith("+++ "):
                current.path = _path(line, "+++ ") or current.old_path
            elif line.strip():
                current.headers.append(line)
        elif line.startswith("+"):
            hunk.lines.append(DiffLine("add", line[1:], None, new))
            new += 1
        elif line.startswith("-"):
            hunk.lines.append(DiffLine("del", line[1:], old, None))
            old += 1
        elif line.startswith("\\"):
            hunk.lines.append(DiffLine("note", line, None, None))
        elif line.startswith(" ") or line == "":
            hunk.lines.append(DiffLine("ctx", line[1:], old, new))
            old += 1
            new += 1
        else:  # past the hunks (the cut note, say)
            stray.append(line)
    return files, stray
