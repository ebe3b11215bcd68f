"""A new worktree gets the project's node_modules linked (and ignored) and its .worktreeinclude files."""

from __future__ import annotations

from pathlib import Path

from octipus_worktrees import EXCLUDE_COMMENT, WorktreeManager
from worktree_support import git, out


def _exclude_file(project: Path) -> Path:
    return project / out(project, "rev-parse", "--git-path", "info/exclude")


def test_node_modules_is_linked_and_ignored_once(project: Path, manager: WorktreeManager) -> None:
    (project / "node_modules" / "left-pad").mkdir(parents=True)
    wt = manager.create(project, "c1")
    link = wt.path / "node_modules"
    assert wt.node_modules_linked and link.is_symlink() and link.resolve() == project / "node_modules"
    assert git(wt.path, "check-ignore", "-q", "node_modules", check=False).returncode == 0
    assert out(wt.path, "status", "--porcelain", "--untracked-files=all") == ""
    second = manager.create(project, "c2")
    assert second.node_modules_linked
    exclude = _exclude_file(project).read_text(encoding="utf-8")
    assert exclude.count("/node_modules\n") == 1 and exclude.count(EXCLUDE_COMMENT) == 1
    assert manager.remove(wt).removed  # the ignored symlink does not make it dirty


def test_node_modules_is_not_linked_over_the_worktrees_own_or_when_asked_not_to(
    project: Path, manager: WorktreeManager
) -> None:
    (project / "node_modules").mkdir()
    (project / "node_modules" / "own.js").write_text("tracked\n", encoding="utf-8")
    git(project, "add", "-f", "node_modules/own.js")
    git(project, "commit", "-q", "-m", "vendored node_modules")
    wt = manager.create(project, "c1")
    assert not wt.node_modules_linked and not (wt.path / "node_modules").is_symlink()
    assert (wt.path / "node_modules" / "own.js").is_file()
    plain = manager.create(project, "c2", link_node_modules=False)
    assert not plain.node_modules_linked


def test_no_node_modules_in_the_project_means_no_link(project: Path, manager: WorktreeManager) -> None:
    wt = manager.create(project, "c1")
    assert not wt.node_modules_linked and not (wt.path / "node_modules").exists()
    assert not _exclude_file(project).is_file() or "/node_modules" not in _exclude_file(project).read_text()


def test_worktreeinclude_copies_untracked_matches_only(
    project: Path, manager: WorktreeManager, tmp_path: Path
) -> None:
    (project / ".worktreeinclude").write_text(".env\n.env.*\n", encoding="utf-8")
    (project / ".gitignore").write_text(".env\n.env.local\n", encoding="utf-8")
    git(project, "add", ".gitignore")
    git(project, "commit", "-q", "-m", "ignore env files")
    (project / ".env").write_text("SECRET=1\n", encoding="utf-8")
    (project / ".env.unignored").write_text("NOT IGNORED=1\n", encoding="utf-8")
    (project / "config").mkdir()
    (project / "config" / ".env.local").write_text("LOCAL=1\n", encoding="utf-8")
    (project / ".env.tracked").write_text("TRACKED=original\n", encoding="utf-8")
    git(project, "add", ".env.tracked")
    git(project, "commit", "-q", "-m", "a tracked env file")
    (project / ".env.tracked").write_text("TRACKED=edited\n", encoding="utf-8")
    # create does not require a clean project: the edit stays there and is not copied
    (project / "other.txt").write_text("not listed\n", encoding="utf-8")
    outside = tmp_path / "outside.env"
    outside.write_text("OUTSIDE=1\n", encoding="utf-8")
    (project / ".env.link").symlink_to(outside)
    wt = manager.create(project, "c1")
    assert wt.included == (".env", "config/.env.local")
    assert (wt.path / ".env").read_text(encoding="utf-8") == "SECRET=1\n"
    assert (wt.path / "config" / ".env.local").read_text(encoding="utf-8") == "LOCAL=1\n"
    assert (wt.path / ".env.tracked").read_text(encoding="utf-8") == "TRACKED=original\n"
    assert not (wt.path / "other.txt").exists() and not (wt.path / ".env.link").exists()
    # matched but not ignored by the project: it would be committed on the child's branch
    assert not (wt.path / ".env.unignored").exists()
