"""A unified diff (``git diff`` text) parsed into files, hunks and numbered lines for the page's
diff view; pure, so the page and its tests share one reading of a diff."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = ["DiffFile", "DiffHunk", "DiffLine", "parse_diff", "unquote_path"]

_HUNK: Final = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$")
_GIT_HEADER: Final = re.compile(r"^diff --git a/(.*) b/(.*)$")
#: git's header when a path needs quoting (non-ASCII, quote, backslash, control characters): C-style
#: strings, e.g. ``diff --git "a/caf\303\251.txt" "b/caf\303\251.txt"`` (either side may be quoted).
_QUOTED: Final = r'"(?:[^"\\]|\\.)*"'
_GIT_HEADER_QUOTED: Final = re.compile(rf"^diff --git ({_QUOTED}|a/\S*) ({_QUOTED}|b/\S*)$")
#: The C escapes git writes in a quoted path besides octal bytes.
_ESCAPES: Final = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
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


def unquote_path(name: str) -> str:
    """A path as git printed it: C-style quoted (``"caf\\303\\251.txt"``: octal UTF-8 bytes and
    backslash escapes) or plain; undecodable bytes become U+FFFD."""
    if len(name) < 2 or not (name.startswith('"') and name.endswith('"')):
        return name
    raw = bytearray()
    body, i = name[1:-1], 0
    while i < len(body):
        char = body[i]
        if char != "\\" or i + 1 == len(body):
            raw += char.encode("utf-8")
            i += 1
        elif body[i + 1 : i + 4].isdigit() and len(body[i + 1 : i + 4]) == 3:
            raw.append(int(body[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:
            raw.append(_ESCAPES.get(body[i + 1], ord(body[i + 1])))
            i += 2
    return raw.decode("utf-8", errors="replace")


def _strip_side(name: str) -> str:
    return name[2:] if name[:2] in ("a/", "b/") else name


def _path(line: str, prefix: str) -> str | None:
    name = line[len(prefix) :]
    name = name if name.startswith('"') else name.split("\t", 1)[0]
    if name == "/dev/null":
        return None
    return _strip_side(unquote_path(name.rstrip("\t")))


def _header(line: str) -> tuple[str, str] | None:
    """The (old, new) paths of a ``diff --git`` line, quoted or not; None for another line."""
    quoted = _GIT_HEADER_QUOTED.match(line)
    if quoted and '"' in line:
        return _strip_side(unquote_path(quoted.group(1))), _strip_side(unquote_path(quoted.group(2)))
    plain = _GIT_HEADER.match(line)
    return (plain.group(1), plain.group(2)) if plain else None


def parse_diff(text: str) -> tuple[list[DiffFile], list[str]]:
    """Split ``git diff`` output into files; returns them and the lines outside any file (a note
    such as the library's "diff cut at N characters" line)."""
    files: list[DiffFile] = []
    stray: list[str] = []
    current: DiffFile | None = None
    hunk: DiffHunk | None = None
    old = new = 0
    # Only "\n" ends a line: str.splitlines() would also split on \f, \x1c-\x1e, \x85, \u2028...
    # inside a line's content and shift every number after it.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        header = _header(line)
        if line.startswith(_CUT_NOTE):
            stray.append(line)
            hunk = None
            continue
        if header:
            current = DiffFile(path=header[1], old_path=header[0])
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
