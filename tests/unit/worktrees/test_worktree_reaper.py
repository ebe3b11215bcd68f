"""The reaper removes only clean, merged, ownerless, old worktrees and reports every other one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from octipus_worktrees import ReapAction, ReapReport, Worktree, WorktreeManager
from worktree_support import git, out

LATER = 2 * 3600.0  # seconds past creation the reaper is run at (over the 1 h minimum age)


@pytest.fixture(scope="module")
def dead_pid() -> int:
    """The pid of a process that has ended (and been waited for)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _commit(wt: Worktree, text: str) -> str:
    (wt.path / "notes.txt").write_text(text, encoding="utf-8")
    git(wt.path, "commit", "-q", "-am", text.strip())
    return out(wt.path, "rev-parse", "HEAD")


def _by_id(reports: list[ReapReport]) -> dict[str, ReapReport]:
    return {report.id: report for report in reports}


def test_a_clean_merged_old_worktree_is_removed(
    project: Path, manager: WorktreeManager, dead_pid: int
) -> None:
    wt = manager.create(project, "c1", owner_pid=dead_pid)
    _commit(wt, "merged work\n")
    git(project, "merge", "-q", "--ff-only", wt.branch)
    [report] = manager.reap(now=time.time() + LATER)
    assert report.action is ReapAction.REMOVED and report.id == "c1"
    assert not wt.path.exists() and not (manager.root / "c1.json").exists()
    assert git(project, "rev-parse", "--verify", "-q", wt.branch, check=False).returncode != 0


def test_dirty_and_unmerged_worktrees_are_kept_and_reported(
    project: Path, manager: WorktreeManager, dead_pid: int
) -> None:
    dirty = manager.create(project, "dirty", owner_pid=dead_pid)
    (dirty.path / "draft.txt").write_text("not committed\n", encoding="utf-8")
    unmerged = manager.create(project, "unmerged", owner_pid=dead_pid)
    tip = _commit(unmerged, "unmerged work\n")
    reports = _by_id(manager.reap(now=time.time() + LATER))
    assert reports["dirty"].action is ReapAction.KEPT and "uncommitted" in reports["dirty"].reason
    assert reports["unmerged"].action is ReapAction.KEPT and "not merged" in reports["unmerged"].reason
    assert (dirty.path / "draft.txt").is_file() and unmerged.path.is_dir()
    assert out(project, "rev-parse", unmerged.branch) == tip


def test_a_live_owner_or_a_young_worktree_is_skipped(
    project: Path, manager: WorktreeManager, dead_pid: int
) -> None:
    live = manager.create(project, "live", owner_pid=os.getpid())
    young = manager.create(project, "young", owner_pid=dead_pid)
    reports = _by_id(manager.reap(min_age_seconds=3600.0))
    assert reports["live"].action is ReapAction.SKIPPED_LIVE and str(os.getpid()) in reports["live"].reason
    assert reports["young"].action is ReapAction.SKIPPED_YOUNG
    assert live.path.is_dir() and young.path.is_dir()
    assert _by_id(manager.reap(now=time.time() + LATER))["young"].action is ReapAction.REMOVED


def test_a_missing_directory_or_a_gone_project_is_kept(
    project: Path, manager: WorktreeManager, dead_pid: int, tmp_path: Path
) -> None:
    wt = manager.create(project, "c1", owner_pid=dead_pid)
    git(project, "worktree", "remove", "--force", str(wt.path))
    [report] = manager.reap(now=time.time() + LATER)
    assert report.action is ReapAction.KEPT and "missing" in report.reason
    assert out(project, "rev-parse", "--verify", wt.branch) == wt.base_sha
    (manager.root / "c1.json").write_text(
        f'{{"project": "{tmp_path / "nowhere"}", "branch": "{wt.branch}", "baseSha": "{wt.base_sha}"}}\n',
        encoding="utf-8",
    )
    [report] = manager.reap(now=time.time() + LATER)
    assert report.action is ReapAction.KEPT and "gone" in report.reason
