"""The diff view's reading of ``git diff`` output: files, extended headers, renames, deletions,
hunks with both line numbers, "no newline" notes and the library's cut note."""

from __future__ import annotations

from octipusd.web.diff_view import DiffLine, parse_diff, unquote_path

DIFF = """\
diff --git a/a.txt b/a.txt
index 1111111..2222222 100644
--- a/a.txt
+++ b/a.txt
@@ -10,3 +10,3 @@ def f():
 keep
-old
+new
 tail
\\ No newline at end of file
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/old name.txt b/new name.txt
similarity index 100%
rename from old name.txt
rename to new name.txt

[diff cut at 10 characters; see the rest with `git diff`]
"""


def test_files_hunks_and_line_numbers() -> None:
    files, notes = parse_diff(DIFF)
    assert [f.path for f in files] == ["a.txt", "gone.txt", "new name.txt"]
    first = files[0]
    assert first.headers == ["index 1111111..2222222 100644"] and (first.added, first.removed) == (1, 1)
    assert first.hunks[0].header == "@@ -10,3 +10,3 @@ def f():"
    assert first.hunks[0].lines == [
        DiffLine("ctx", "keep", 10, 10),
        DiffLine("del", "old", 11, None),
        DiffLine("add", "new", None, 11),
        DiffLine("ctx", "tail", 12, 12),
        DiffLine("note", "\\ No newline at end of file", None, None),
    ]
    gone = files[1]
    assert gone.path == "gone.txt" and gone.headers == ["deleted file mode 100644"]
    assert gone.hunks[0].lines == [DiffLine("del", "bye", 1, None)]
    renamed = files[2]
    assert renamed.old_path == "old name.txt" and renamed.hunks == []
    assert "rename from old name.txt" in renamed.headers
    assert notes == ["[diff cut at 10 characters; see the rest with `git diff`]"]


def test_an_empty_diff_has_no_file() -> None:
    assert parse_diff("") == ([], [])


def test_only_newline_ends_a_line() -> None:
    """Form feeds, file separators, NEL and U+2028 inside a line stay in it (no phantom lines)."""
    diff = "diff --git a/x.txt b/x.txt\n--- a/x.txt\n+++ b/x.txt\n@@ -1,2 +1,2 @@\n ctx\x0cpage\n-a\x1cb\x85c\n+a\u2028b\n tail\n"
    [file] = parse_diff(diff)[0]
    assert file.hunks[0].lines == [
        DiffLine("ctx", "ctx\x0cpage", 1, 1),
        DiffLine("del", "a\x1cb\x85c", 2, None),
        DiffLine("add", "a\u2028b", None, 2),
        DiffLine("ctx", "tail", 3, 3),
    ]


def test_quoted_paths_are_unescaped_and_get_their_own_hunks() -> None:
    """git quotes non-ASCII and special paths C-style (octal UTF-8 bytes); each file keeps its hunks."""
    diff = (
        "diff --git a/plain.txt b/plain.txt\n--- a/plain.txt\n+++ b/plain.txt\n@@ -1 +1 @@\n-a\n+b\n"
        'diff --git "a/caf\\303\\251.txt" "b/caf\\303\\251.txt"\n'
        "index 1..2 100644\n"
        '--- "a/caf\\303\\251.txt"\n+++ "b/caf\\303\\251.txt"\n@@ -7 +7 @@\n-x\n+y\n'
    )
    plain, cafe = parse_diff(diff)[0]
    assert plain.path == "plain.txt" and len(plain.hunks) == 1
    assert (cafe.path, cafe.old_path) == ("café.txt", "café.txt")
    assert cafe.hunks[0].lines == [DiffLine("del", "x", 7, None), DiffLine("add", "y", None, 7)]
    assert unquote_path('"b/say \\"hi\\"\\tthere"') == 'b/say "hi"\tthere'
