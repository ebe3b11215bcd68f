"""Removal never loses work, stale directories do not block re-creation, and hooks never run."""

from __future__ import annotations

import shutil
from pathlib import Path

from octipus_worktrees import MergeOutcome, WorktreeManager
from worktree_support import git, out


def test_removal_refuses_uncommitted_changes(project: Path, manager: WorktreeManager) -> None:
    wt = manager.create(project, "c1")
    (wt.path / "draft.txt").write_text("not committed\n", encoding="utf-8")
    outcome = manager.remove(wt)
    assert not outcome.removed and "uncommitted changes" in outcome.detail
    assert (wt.path / "draft.txt").is_file() and (manager.root / "c1.pid").is_file()
    assert out(project, "rev-parse", "--verify", wt.branch) == wt.base_sha


def test_a_detached_head_is_kept_by_fast_forwarding_the_branch(
    project: Path, manager: WorktreeManager
) -> None:
    wt = manager.create(project, "c1")
    git(wt.path, "checkout", "-q", "--detach")
    (wt.path / "notes.txt").write_text("detached work\n", encoding="utf-8")
    git(wt.path, "commit", "-q", "-am", "detached work")
    head = out(wt.path, "rev-parse", "HEAD")
    outcome = manager.remove(wt)
    assert outcome.removed and not outcome.branch_deleted and outcome.kept_ref == wt.branch
    assert out(project, "rev-parse", wt.branch) == head


def test_a_diverged_head_gets_a_detached_ref_and_the_branch_stays(
    project: Path, manager: WorktreeManager
) -> None:
    wt = manager.create(project, "c1")
    (wt.path / "notes.txt").write_text("on the branch\n", encoding="utf-8")
    git(wt.path, "commit", "-q", "-am", "on the branch")
    branch_tip = out(wt.path, "rev-parse", "HEAD")
    git(wt.path, "checkout", "-q", "--detach", wt.base_sha)
    (wt.path / "other.txt").write_text("elsewhere\n", encoding="utf-8")
    git(wt.path, "add", "other.txt")
    git(wt.path, "commit", "-q", "-m", "elsewhere")
    head = out(wt.path, "rev-parse", "HEAD")
    outcome = manager.remove(wt)
    assert outcome.removed and outcome.kept_ref == f"{wt.branch}-detached"
    assert out(project, "rev-parse", f"{wt.branch}-detached") == head
    assert out(project, "rev-parse", wt.branch) == branch_tip  # unmerged: never deleted


def test_a_kept_branch_can_be_merged_after_removal(project: Path, manager: WorktreeManager) -> None:
    wt = manager.create(project, "c1")
    (wt.path / "notes.txt").write_text("later\n", encoding="utf-8")
    report = manager.finish(wt, merge=False)
    assert report.merge is MergeOutcome.SKIPPED_STATUS and not wt.path.exists()
    assert manager.merge(wt) == (MergeOutcome.MERGED, wt.branch)
    assert (project / "notes.txt").read_text(encoding="utf-8") == "later\n"
    assert manager.remove(wt).branch_deleted  # merged now, so branch -d takes it


def test_a_stale_directory_without_git_metadata_is_set_aside_and_recreated(
    project: Path, manager: WorktreeManager
) -> None:
    wt = manager.create(project, "c1")
    (wt.path / "leftover.txt").write_text("left by a crash\n", encoding="utf-8")
    shutil.rmtree(project / ".git" / "worktrees" / "c1")  # the metadata is gone, the directory stays
    again = manager.create(project, "c1")
    assert again.path == wt.path and out(again.path, "symbolic-ref", "--short", "HEAD") == wt.branch
    assert not (again.path / "leftover.txt").exists()
    [aside] = (manager.root / ".stale").iterdir()
    assert (aside / "leftover.txt").read_text(encoding="utf-8") == "left by a crash\n"


def test_an_empty_stale_directory_or_a_deleted_one_is_recreated(
    project: Path, manager: WorktreeManager
) -> None:
    (manager.root / "c1").mkdir(parents=True)
    assert manager.create(project, "c1").path.is_dir()
    wt = manager.create(project, "c2")
    shutil.rmtree(wt.path)  # deleted by hand: its registration and branch remain until pruned
    assert out(manager.create(project, "c2").path, "symbolic-ref", "--short", "HEAD") == wt.branch
    assert not (manager.root / ".stale").exists()


def test_server_git_runs_no_hook(project: Path, manager: WorktreeManager, tmp_path: Path) -> None:
    marker = tmp_path / "hook-ran"
    hooks = project / ".git" / "hooks"
    for name in (
        "pre-commit",
        "commit-msg",
        "post-commit",
        "post-checkout",
        "pre-merge-commit",
        "post-merge",
    ):
        (hooks / name).write_text(f"#!/bin/sh\necho {name} >> {marker}\nexit 1\n", encoding="utf-8")
        (hooks / name).chmod(0o755)
    (project / "owner.txt").write_text("x\n", encoding="utf-8")
    git(project, "add", "owner.txt")
    assert git(project, "commit", "-q", "-m", "owner", check=False).returncode != 0  # the hook is live
    git(project, "reset", "-q")
    (project / "owner.txt").unlink()
    marker.unlink()
    wt = manager.create(project, "c1")
    (wt.path / "notes.txt").write_text("hooked\n", encoding="utf-8")
    report = manager.finish(wt, merge=True)
    assert report.merge is MergeOutcome.MERGED
    assert not marker.exists()


def test_a_worktree_deleted_by_hand_is_pruned_and_its_empty_branch_deleted(
    project: Path, manager: WorktreeManager
) -> None:
    wt = manager.create(project, "c1")
    shutil.rmtree(wt.path)
    assert manager.eligible(wt.path) is not None  # a missing directory never runs git elsewhere
    outcome = manager.remove(wt)
    assert outcome.removed and outcome.branch_deleted and outcome.kept_ref is None
    assert out(project, "worktree", "list", "--porcelain").count("worktree ") == 1
