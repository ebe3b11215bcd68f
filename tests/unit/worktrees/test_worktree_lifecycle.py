"""A child's worktree on a real repository: eligibility, creation, finish, merge and removal."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from octipus_worktrees import (
    AGENT_EMAIL,
    COMMIT_MESSAGE,
    MergeOutcome,
    Worktree,
    WorktreeManager,
    default_root,
)
from worktree_support import git, out

from octipusd.errors import ConflictError, InvalidRequestError, WorktreeError


def branches(repo: Path) -> list[str]:
    return out(repo, "branch", "--format=%(refname:short)").split()


def edit(wt: Worktree, name: str = "notes.txt", text: str = "one\nTWO\nthree\n") -> None:
    (wt.path / name).write_text(text, encoding="utf-8")


# ---------------------------------------------------------------------------- who gets one


def test_a_clean_repository_root_is_eligible_and_untracked_files_do_not_count(
    project: Path, manager: WorktreeManager
) -> None:
    (project / "scratch.txt").write_text("untracked\n", encoding="utf-8")
    assert manager.eligible(project) is None


def test_a_dirty_project_is_not_eligible_and_says_why(project: Path, manager: WorktreeManager) -> None:
    (project / "notes.txt").write_text("changed\n", encoding="utf-8")
    reason = manager.eligible(project)
    assert reason is not None and "uncommitted tracked changes" in reason


def test_a_subfolder_or_a_merge_in_progress_is_not_eligible(project: Path, manager: WorktreeManager) -> None:
    (project / "sub").mkdir()
    reason = manager.eligible(project / "sub")
    assert reason is not None and "not a git repository root" in reason
    (project / ".git" / "MERGE_HEAD").write_text(out(project, "rev-parse", "HEAD") + "\n", encoding="utf-8")
    reason = manager.eligible(project)
    assert reason is not None and "MERGE_HEAD" in reason


# ---------------------------------------------------------------------------- creation


def test_create_makes_the_branch_at_head_and_writes_the_pid_file(
    project: Path, manager: WorktreeManager
) -> None:
    wt = manager.create(project, "c0123456789abcdef0123", owner_pid=4242)
    assert wt.path == manager.root / "c0123456789abcdef0123"
    assert wt.branch == "octipus/c0123456789abcdef0123"
    assert wt.base_sha == out(project, "rev-parse", "HEAD") == out(wt.path, "rev-parse", "HEAD")
    assert out(wt.path, "symbolic-ref", "HEAD") == f"refs/heads/{wt.branch}"
    assert (manager.root / f"{wt.id}.pid").read_text(encoding="utf-8").split()[0] == "4242"
    assert manager.reuse(wt.id) == wt
    assert [info.worktree for info in manager.list()] == [wt]


def test_the_owner_is_its_pid_and_start_time_so_a_reused_pid_is_no_owner(
    project: Path, manager: WorktreeManager
) -> None:
    """A later process with the owner's pid (a restarted daemon) is not the owner."""
    wt = manager.create(project, "c1")
    pid_file = manager.root / f"{wt.id}.pid"
    pid, start = pid_file.read_text(encoding="utf-8").split()
    assert int(pid) == os.getpid() and manager.owner(wt.id) == os.getpid()
    pid_file.write_text(f"{pid} {float(start) - 60:.2f}\n", encoding="utf-8")  # started a minute earlier
    assert manager.owner(wt.id) is None
    pid_file.write_text(f"{pid}\n", encoding="utf-8")  # an older Octipus's file: the pid alone
    assert manager.owner(wt.id) == os.getpid()


def test_create_refuses_a_bad_id_and_a_non_root(project: Path, manager: WorktreeManager) -> None:
    with pytest.raises(InvalidRequestError):
        manager.create(project, "../escape")
    (project / "sub").mkdir()
    with pytest.raises(WorktreeError, match="not a git repository root"):
        manager.create(project / "sub", "c1")
    assert not (manager.root / "c1.pid").exists() and not (manager.root / "c1").exists()


def test_an_existing_live_worktree_path_fails_and_is_not_touched(
    project: Path, manager: WorktreeManager
) -> None:
    wt = manager.create(project, "c1")
    edit(wt)
    with pytest.raises(ConflictError, match="already exists"):
        manager.create(project, "c1")
    assert (wt.path / "notes.txt").read_text(encoding="utf-8") == "one\nTWO\nthree\n"


def test_the_root_env_is_honoured_only_when_absolute(tmp_path: Path) -> None:
    assert default_root({"OCTIPUS_WORKTREES_DIR": str(tmp_path)}) == tmp_path
    assert default_root({"OCTIPUS_WORKTREES_DIR": "relative/dir"}) == Path.home() / ".octipus" / "worktrees"


# ---------------------------------------------------------------------------- finish and merge


def test_a_child_commit_is_merged_and_the_worktree_and_branch_go(
    project: Path, manager: WorktreeManager
) -> None:
    wt = manager.create(project, "c1")
    edit(wt)
    (wt.path / "new.txt").write_text("new\n", encoding="utf-8")  # untracked: added too
    report = manager.finish(wt, merge=True)
    assert report.merge is MergeOutcome.MERGED and report.merge_detail == wt.branch
    assert report.files_changed == 2 and "2 files changed" in report.diff_stat
    assert report.to_dict() == {
        "branch": wt.branch,
        "worktreePath": str(wt.path),
        "baseSha": wt.base_sha,
        "headSha": report.head_sha,
        "diffStat": report.diff_stat,
        "filesChanged": 2,
        "merge": "merged",
        "mergeDetail": wt.branch,
        "branchKept": False,
    }
    assert (project / "new.txt").is_file() and "TWO" in (project / "notes.txt").read_text(encoding="utf-8")
    assert out(project, "log", "-1", "--format=%P").count(" ") == 1  # --no-ff: a merge commit
    assert out(project, "log", "-1", "--format=%ae", report.head_sha) == AGENT_EMAIL
    assert out(project, "log", "-1", "--format=%s", report.head_sha) == COMMIT_MESSAGE.format(id="c1")
    assert not wt.path.exists() and wt.branch not in branches(project)
    assert manager.list() == [] and not (manager.root / "c1.pid").exists()
    assert out(project, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_two_children_on_the_same_line_one_merges_the_other_conflicts(
    project: Path, manager: WorktreeManager
) -> None:
    first, second = manager.create(project, "c1"), manager.create(project, "c2")
    edit(first, text="one\nFIRST\nthree\n")
    edit(second, text="one\nSECOND\nthree\n")
    assert manager.finish(first, merge=True).merge is MergeOutcome.MERGED
    report = manager.finish(second, merge=True)
    assert report.merge is MergeOutcome.CONFLICT
    assert report.merge_detail is not None and "notes.txt" in report.merge_detail
    assert report.branch_kept and report.to_dict()["keptRef"] == second.branch
    assert second.branch in branches(project)
    assert out(project, "status", "--porcelain") == ""
    assert git(project, "rev-parse", "-q", "--verify", "MERGE_HEAD", check=False).returncode != 0
    assert (project / "notes.txt").read_text(encoding="utf-8") == "one\nFIRST\nthree\n"
    assert out(project, "rev-parse", second.branch) == report.head_sha  # the work is still there


def test_a_moved_project_is_skipped_and_the_branch_kept(project: Path, manager: WorktreeManager) -> None:
    wt = manager.create(project, "c1")
    edit(wt)
    git(project, "commit", "-q", "--amend", "-m", "rewritten")  # the base is no longer an ancestor
    report = manager.finish(wt, merge=True)
    assert report.merge is MergeOutcome.SKIPPED_MOVED
    assert report.branch_kept and wt.branch in branches(project)
    assert out(project, "rev-parse", wt.branch) == report.head_sha


def test_a_detached_project_is_skipped(project: Path, manager: WorktreeManager) -> None:
    wt = manager.create(project, "c1")
    edit(wt)
    git(project, "checkout", "-q", "--detach")
    report = manager.finish(wt, merge=True)
    assert report.merge is MergeOutcome.SKIPPED_DETACHED and wt.branch in branches(project)


def test_a_project_dirtied_meanwhile_is_skipped(project: Path, manager: WorktreeManager) -> None:
    wt = manager.create(project, "c1")
    edit(wt)
    (project / "notes.txt").write_text("the person's edit\n", encoding="utf-8")
    report = manager.finish(wt, merge=True)
    assert report.merge is MergeOutcome.SKIPPED_DIRTY
    assert (project / "notes.txt").read_text(encoding="utf-8") == "the person's edit\n"


def test_no_changes_deletes_the_branch(project: Path, manager: WorktreeManager) -> None:
    wt = manager.create(project, "c1")
    report = manager.finish(wt, merge=True)
    assert report.merge is MergeOutcome.NO_CHANGES and report.head_sha == wt.base_sha
    assert report.files_changed == 0 and not report.branch_kept
    assert not wt.path.exists() and wt.branch not in branches(project)


def test_an_unmerged_branch_is_kept_with_the_given_reason(project: Path, manager: WorktreeManager) -> None:
    wt = manager.create(project, "c1")
    edit(wt)
    report = manager.finish(wt, merge=False, reason=MergeOutcome.SKIPPED_OTHER_ATTEMPT)
    assert report.merge is MergeOutcome.SKIPPED_OTHER_ATTEMPT and report.branch_kept
    assert not wt.path.exists() and out(project, "rev-parse", wt.branch) == report.head_sha
    assert manager.finish(manager.create(project, "c2"), merge=False).merge is MergeOutcome.NO_CHANGES
    edit(wt2 := manager.create(project, "c3"))
    assert manager.finish(wt2, merge=False).merge is MergeOutcome.SKIPPED_STATUS
    assert wt.branch in branches(project) and wt2.branch in branches(project)


def test_a_worktree_off_its_branch_fails_and_nothing_else_happens(
    project: Path, manager: WorktreeManager
) -> None:
    wt = manager.create(project, "c1")
    git(wt.path, "checkout", "-q", "--detach")
    edit(wt)
    report = manager.finish(wt, merge=True)
    assert report.merge is MergeOutcome.FAILED and report.branch_kept
    assert wt.path.is_dir() and out(wt.path, "status", "--porcelain") != ""  # not committed, not removed


def test_merges_into_one_repository_run_one_at_a_time(project: Path, manager: WorktreeManager) -> None:
    children = [manager.create(project, f"c{n}") for n in range(4)]
    for n, wt in enumerate(children):
        edit(wt, name=f"file{n}.txt", text=f"{n}\n")
    outcomes: list[MergeOutcome] = []
    threads = [
        threading.Thread(target=lambda w=wt: outcomes.append(manager.finish(w, merge=True).merge))
        for wt in children
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == [MergeOutcome.MERGED] * 4
    assert all((project / f"file{n}.txt").is_file() for n in range(4))
