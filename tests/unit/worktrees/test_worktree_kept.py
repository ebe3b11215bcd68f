"""A branch kept unmerged stays listed, is reviewed, merged or discarded by a person, and its record
is dropped by the reaper only once git proves it merged or gone (issue 15 item 6); on real git."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from octipus_worktrees import (
    GitLimits,
    MergeOutcome,
    ReapAction,
    ReapReport,
    Worktree,
    WorktreeManager,
    WorktreeState,
    state_of,
)
from worktree_support import git, out

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError

LATER = 2 * 3600.0  # seconds past creation the reaper is run at (over the 1 h minimum age)


@pytest.fixture(scope="module")
def dead_pid() -> int:
    """The pid of a process that has ended (and been waited for)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def commit(wt: Worktree, text: str, name: str = "notes.txt") -> str:
    (wt.path / name).write_text(text, encoding="utf-8")
    git(wt.path, "add", name)
    git(wt.path, "commit", "-q", "-m", text.strip()[:40] or "empty")
    return out(wt.path, "rev-parse", "HEAD")


def kept(
    project: Path, manager: WorktreeManager, worktree_id: str, text: str = "one\nTWO\nthree\n"
) -> Worktree:
    """A worktree whose child changed notes.txt and finished without a merge: its branch is kept."""
    wt = manager.create(project, worktree_id)
    (wt.path / "notes.txt").write_text(text, encoding="utf-8")
    report = manager.finish(wt, merge=False)
    assert report.branch_kept and not wt.path.exists()
    return wt


def has_ref(repo: Path, ref: str) -> bool:
    return git(repo, "rev-parse", "--verify", "-q", f"refs/heads/{ref}", check=False).returncode == 0


def reap(manager: WorktreeManager, *, dry_run: bool = False) -> dict[str, ReapReport]:
    return {r.id: r for r in manager.reap(now=time.time() + LATER, dry_run=dry_run)}


# ---------------------------------------------------------------------------- listing


def test_a_kept_branch_stays_listed_and_a_merged_one_does_not(
    project: Path, manager: WorktreeManager
) -> None:
    wt = kept(project, manager, "c1")
    merged = manager.create(project, "c2")
    (merged.path / "other.txt").write_text("merged work\n", encoding="utf-8")
    assert manager.finish(merged, merge=True).merge is MergeOutcome.MERGED
    [info] = manager.list()
    assert info.worktree.id == "c1" and not info.exists and info.kept_ref == wt.branch
    assert info.owner_pid is None and state_of(info) is WorktreeState.KEPT
    record = json.loads((manager.root / "c1.json").read_text(encoding="utf-8"))
    assert record["kept"] is True and record["keptRef"] == wt.branch
    assert manager.get("c1") == info
    with pytest.raises(NotFoundError, match="c2"):
        manager.get("c2")
    with pytest.raises(InvalidRequestError, match="letters, digits"):
        manager.get("../c1")


def test_states_live_and_left(project: Path, manager: WorktreeManager, dead_pid: int) -> None:
    manager.create(project, "live", owner_pid=os.getpid())
    manager.create(project, "left", owner_pid=dead_pid)
    states = {i.worktree.id: state_of(i) for i in manager.list()}
    assert states == {"left": WorktreeState.LEFT, "live": WorktreeState.LIVE}


def test_a_record_naming_refs_octipus_does_not_own_is_not_trusted(
    project: Path, manager: WorktreeManager
) -> None:
    wt = kept(project, manager, "c1")
    record = manager.root / "c1.json"
    body = json.loads(record.read_text(encoding="utf-8"))
    record.write_text(json.dumps({**body, "keptRef": "main"}), encoding="utf-8")
    assert manager.get("c1").kept_ref == wt.branch  # never "main"
    manager.discard("c1")
    assert has_ref(project, "main") and not has_ref(project, wt.branch)
    for bad in ({"branch": "main"}, {"baseSha": "--output=/tmp/x"}):
        (manager.root / "c9.json").write_text(json.dumps({**body, **bad}), encoding="utf-8")
        assert [i.worktree.id for i in manager.list()] == []


# ---------------------------------------------------------------------------- the reaper


def test_the_reaper_reports_a_kept_branch_until_it_is_merged_then_drops_it(
    project: Path, manager: WorktreeManager
) -> None:
    wt = kept(project, manager, "c1")
    for dry_run in (True, False):
        report = reap(manager, dry_run=dry_run)["c1"]
        assert report.action is ReapAction.KEPT
        assert report.reason == f"unmerged branch {wt.branch} kept for review"
    assert has_ref(project, wt.branch) and manager.get("c1").kept
    git(project, "merge", "-q", "--no-ff", "--no-edit", wt.branch)  # a person merged it by hand
    dry = reap(manager, dry_run=True)["c1"]
    assert dry.action is ReapAction.DROPPED and "would delete" in dry.reason
    assert has_ref(project, wt.branch) and manager.get("c1").kept  # a dry run changes nothing
    done = reap(manager)["c1"]
    assert done.action is ReapAction.DROPPED and "merged into main" in done.reason
    assert not has_ref(project, wt.branch) and manager.list() == []


def test_the_reaper_drops_the_record_of_a_ref_that_is_gone(project: Path, manager: WorktreeManager) -> None:
    wt = kept(project, manager, "c1")
    git(project, "branch", "-D", wt.branch)
    report = reap(manager)["c1"]
    assert report.action is ReapAction.DROPPED and "gone" in report.reason
    assert manager.list() == []


def test_the_reaper_keeps_a_kept_record_while_the_id_is_made_again(
    project: Path, manager: WorktreeManager
) -> None:
    wt = kept(project, manager, "c1")
    git(project, "merge", "-q", "--no-ff", "--no-edit", wt.branch)
    (manager.root / "c1.pid").write_text(f"{os.getpid()}\n", encoding="utf-8")  # a create under way
    report = reap(manager)["c1"]
    assert report.action is ReapAction.SKIPPED_LIVE
    assert has_ref(project, wt.branch) and (manager.root / "c1.json").is_file()
    assert not manager.drop_kept_record("c1")


def test_a_clean_merged_left_worktree_is_only_said_to_be_removed_in_a_dry_run(
    project: Path, manager: WorktreeManager, dead_pid: int
) -> None:
    wt = manager.create(project, "c1", owner_pid=dead_pid)
    dry = reap(manager, dry_run=True)["c1"]
    assert dry.action is ReapAction.REMOVED and "would be removed" in dry.reason
    assert wt.path.is_dir() and (manager.root / "c1.json").is_file()


# ---------------------------------------------------------------------------- diff


def test_diff_shows_the_kept_work_against_its_base(project: Path, manager: WorktreeManager) -> None:
    kept(project, manager, "c1")
    text = manager.diff("c1")
    assert "diff --git a/notes.txt b/notes.txt" in text and "-two" in text and "+TWO" in text
    with pytest.raises(NotFoundError):
        manager.diff("c2")
    with pytest.raises(InvalidRequestError):
        manager.diff("-c1")


def test_diff_is_valid_text_and_cut_at_its_limit(project: Path, tmp_path: Path) -> None:
    manager = WorktreeManager(tmp_path / "small", GitLimits(diff_chars=200))
    wt = manager.create(project, "c1")
    (wt.path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1") + b"x" * 400 + b"\n")
    manager.finish(wt, merge=False)
    text = manager.diff("c1")
    text.encode("utf-8")  # no lone surrogate: it can be sent as JSON
    assert "caf\ufffd" in text and "[diff cut at 200 characters" in text


def test_diff_of_a_ref_that_is_gone_is_not_found(project: Path, manager: WorktreeManager) -> None:
    wt = kept(project, manager, "c1")
    git(project, "branch", "-D", wt.branch)
    with pytest.raises(NotFoundError, match="no longer exists"):
        manager.diff("c1")


# ---------------------------------------------------------------------------- merge


def test_merge_kept_merges_deletes_the_branch_and_drops_the_record(
    project: Path, manager: WorktreeManager
) -> None:
    wt = kept(project, manager, "c1")
    outcome, detail = manager.merge_kept("c1")
    assert outcome is MergeOutcome.MERGED, detail
    assert f"merged {wt.branch} into main" in detail and "git branch -d" in detail
    assert (project / "notes.txt").read_text(encoding="utf-8") == "one\nTWO\nthree\n"
    assert not has_ref(project, wt.branch) and manager.list() == []


def test_a_conflicting_merge_is_aborted_and_the_branch_kept(project: Path, manager: WorktreeManager) -> None:
    wt = kept(project, manager, "c1", text="one\nCHILD\nthree\n")
    (project / "notes.txt").write_text("one\nPERSON\nthree\n", encoding="utf-8")
    git(project, "commit", "-q", "-am", "the person's edit")
    tip = out(project, "rev-parse", wt.branch)
    outcome, detail = manager.merge_kept("c1")
    assert outcome is MergeOutcome.CONFLICT and "notes.txt" in detail
    assert out(project, "status", "--porcelain") == ""  # aborted: nothing half-merged
    assert out(project, "rev-parse", wt.branch) == tip and manager.get("c1").kept


def test_merge_kept_refuses_an_unsafe_project_and_keeps_everything(
    project: Path, manager: WorktreeManager
) -> None:
    wt = kept(project, manager, "c1")
    (project / "notes.txt").write_text("a person's uncommitted edit\n", encoding="utf-8")
    outcome, detail = manager.merge_kept("c1")
    assert outcome is MergeOutcome.SKIPPED_DIRTY and "uncommitted" in detail
    assert has_ref(project, wt.branch) and manager.get("c1").kept


def test_merge_of_a_left_worktree_removes_it_safely_first(
    project: Path, manager: WorktreeManager, dead_pid: int
) -> None:
    wt = manager.create(project, "c1", owner_pid=dead_pid)
    commit(wt, "left behind\n")
    (wt.path / "draft.txt").write_text("not committed\n", encoding="utf-8")
    with pytest.raises(ConflictError, match="uncommitted changes"):
        manager.merge_kept("c1")
    assert (wt.path / "draft.txt").is_file()
    (wt.path / "draft.txt").unlink()
    outcome, detail = manager.merge_kept("c1")
    assert outcome is MergeOutcome.MERGED, detail
    assert not wt.path.exists() and (project / "notes.txt").read_text(encoding="utf-8") == "left behind\n"
    assert not has_ref(project, wt.branch) and manager.list() == []


def test_a_live_owner_refuses_merge_and_discard(project: Path, manager: WorktreeManager) -> None:
    wt = manager.create(project, "c1", owner_pid=os.getpid())
    tip = commit(wt, "in progress\n")
    for act in (manager.merge_kept, manager.discard):
        with pytest.raises(ConflictError, match=f"live process \\(pid {os.getpid()}\\)"):
            act("c1")
    assert wt.path.is_dir() and out(project, "rev-parse", wt.branch) == tip
    assert out(project, "rev-parse", "main") == wt.base_sha


# ---------------------------------------------------------------------------- discard


def test_discard_deletes_an_unmerged_kept_branch_naming_its_commit(
    project: Path, manager: WorktreeManager
) -> None:
    wt = kept(project, manager, "c1")
    tip = out(project, "rev-parse", wt.branch)
    result = manager.discard("c1")
    assert result.deleted == {wt.branch: tip} and not result.worktree_removed
    assert tip in result.detail and not has_ref(project, wt.branch) and manager.list() == []
    assert out(project, "rev-parse", "main") == wt.base_sha  # nothing merged


def test_discard_refuses_uncommitted_changes_and_removes_a_clean_worktree(
    project: Path, manager: WorktreeManager, dead_pid: int
) -> None:
    wt = manager.create(project, "c1", owner_pid=dead_pid)
    tip = commit(wt, "unmerged\n")
    (wt.path / "draft.txt").write_text("not committed\n", encoding="utf-8")
    with pytest.raises(ConflictError, match="uncommitted changes"):
        manager.discard("c1")
    assert (wt.path / "draft.txt").is_file() and out(project, "rev-parse", wt.branch) == tip
    (wt.path / "draft.txt").unlink()
    result = manager.discard("c1")
    assert result.worktree_removed and result.deleted == {wt.branch: tip}
    assert not wt.path.exists() and not has_ref(project, wt.branch) and manager.list() == []
    assert not (manager.root / "c1.pid").exists()


def test_a_diverged_head_is_kept_as_the_detached_ref_and_discard_takes_both(
    project: Path, manager: WorktreeManager
) -> None:
    wt = manager.create(project, "c1")
    on_branch = commit(wt, "on the branch\n")
    git(wt.path, "checkout", "-q", "--detach", wt.base_sha)
    head = commit(wt, "elsewhere\n", name="other.txt")
    assert manager.remove(wt).kept_ref == f"{wt.branch}-detached"
    info = manager.get("c1")
    assert info.kept_ref == f"{wt.branch}-detached" and "other.txt" in manager.diff("c1")
    assert reap(manager)["c1"].reason.startswith(f"unmerged branch {wt.branch}-detached")
    result = manager.discard("c1")
    assert result.deleted == {f"{wt.branch}-detached": head, wt.branch: on_branch}
    assert manager.list() == []


def test_a_kept_id_made_again_is_a_fresh_worktree(project: Path, manager: WorktreeManager) -> None:
    wt = kept(project, manager, "c1")
    git(project, "merge", "-q", "--no-ff", "--no-edit", wt.branch)
    again = manager.create(project, "c1")
    info = manager.get("c1")
    assert info.exists and not info.kept and again.base_sha == out(project, "rev-parse", "HEAD")


def test_a_kept_branch_whose_project_is_gone_cannot_be_merged_but_can_be_discarded(
    project: Path, manager: WorktreeManager
) -> None:
    kept(project, manager, "c1")
    moved = project.with_name("moved")
    project.rename(moved)
    with pytest.raises(ConflictError, match="is gone: nothing to merge into"):
        manager.merge_kept("c1")
    assert reap(manager)["c1"].action is ReapAction.KEPT  # the reaper only reports it
    result = manager.discard("c1")
    assert result.deleted == {} and "gone" in result.detail and manager.list() == []
    assert has_ref(moved, "octipus/c1")  # the refs went with the project, untouched


def test_finishing_lets_go_so_a_worktree_left_in_place_can_be_discarded(
    project: Path, manager: WorktreeManager
) -> None:
    wt = manager.create(project, "c1")  # owned by this (live) process
    tip = commit(wt, "on the branch\n")
    git(wt.path, "checkout", "-q", "--detach")
    report = manager.finish(wt, merge=True)
    assert report.merge is MergeOutcome.FAILED and wt.path.is_dir()  # left in place, untouched
    info = manager.get("c1")
    assert info.owner_pid is None and state_of(info) is WorktreeState.LEFT
    assert manager.discard("c1").deleted == {wt.branch: tip} and not wt.path.exists()
