"""The orphan reaper's decisions (FACTS.md §1, "Reaper"; issue 15 item 3).

A worktree whose owner is alive, or that is younger than the minimum age, is skipped. Any other
is removed (through :meth:`~.lifecycle.WorktreeManager.remove`) only when it is clean and git
proves its HEAD and its branch are in the project's current branch; the rest are kept and the
reason reported. Nothing unmerged or dirty is ever deleted.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

import psutil

from octipusd.errors import WorktreeError

from .git import Git
from .model import ReapAction, ReapReport, Worktree, WorktreeInfo

if TYPE_CHECKING:
    from .lifecycle import WorktreeManager

__all__ = ["MIN_AGE_S", "owner_alive", "reap"]

#: Seconds a worktree must have existed (since its record or pid file was last written) before
#: the reaper considers it.
MIN_AGE_S: Final = 3600.0


def owner_alive(pid: int | None) -> bool:
    """Whether ``pid`` names a running process (a zombie is dead; one we may not see is alive)."""
    if pid is None or pid <= 0:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def reap(
    manager: WorktreeManager, now: float | None = None, min_age_s: float = MIN_AGE_S
) -> list[ReapReport]:
    """Look at every recorded worktree under ``manager.root`` once and act (see the module).

    Args:
        manager: Whose root and ``remove`` are used.
        now: The time ages are measured at (seconds since the epoch; default now).
        min_age_s: Younger worktrees are skipped.

    Returns:
        One report per worktree, by id. A git failure on one worktree keeps it (reported) and
        the others are still looked at; nothing raises.
    """
    at = time.time() if now is None else now
    reports: list[ReapReport] = []
    for info in manager.list():
        wt = info.worktree
        try:
            action, reason = _decide(manager, info, at, min_age_s)
        except WorktreeError as exc:
            action, reason = ReapAction.KEPT, f"git failed: {exc}"
        reports.append(ReapReport(id=wt.id, path=wt.path, action=action, reason=reason))
    return reports


def _decide(
    manager: WorktreeManager, info: WorktreeInfo, at: float, min_age_s: float
) -> tuple[ReapAction, str]:
    wt = info.worktree
    if owner_alive(info.owner_pid):
        return ReapAction.SKIPPED_LIVE, f"its owner (pid {info.owner_pid}) is alive"
    age = at - _written_at(manager.root, wt.id)
    if age < min_age_s:
        return ReapAction.SKIPPED_YOUNG, f"{age:.0f} s old, under the {min_age_s:.0f} s minimum age"
    why = _why_kept(manager, wt)
    if why is not None:
        return ReapAction.KEPT, why
    outcome = manager.remove(wt)
    return (ReapAction.REMOVED if outcome.removed else ReapAction.KEPT), outcome.detail


def _written_at(root: Path, worktree_id: str) -> float:
    """The last time the record or pid file was written (a reuse rewrites the pid file)."""
    times = []
    for name in (f"{worktree_id}.json", f"{worktree_id}.pid"):
        try:
            times.append((root / name).stat().st_mtime)
        except OSError:
            continue
    return max(times, default=0.0)


def _why_kept(manager: WorktreeManager, wt: Worktree) -> str | None:
    """Why ``wt`` must not be removed, or None when it is clean and merged."""
    if not wt.project.is_dir():
        return f"its project {wt.project} is gone"
    project = Git(wt.project, manager.limits)
    bare = project.run("rev-parse", "--is-bare-repository")
    if not bare.ok or bare.stdout != "false":
        return f"{wt.project} is not a non-bare git repository"
    if not wt.path.is_dir():
        return f"its directory {wt.path} is missing"
    if wt.path.resolve() not in manager.registered(project):
        return f"{wt.path} is not a worktree of {wt.project}"
    here = Git(wt.path, manager.limits)
    status = here.run("status", "--porcelain", "--untracked-files=all")
    if not status.ok or status.stdout:
        return "it has uncommitted changes" if status.ok else here.quote(status.stderr)
    current = project.symbolic_head()
    if current is None:
        return f"{wt.project}'s HEAD is detached: nothing to be merged into"
    for label, sha in (("HEAD", here.head_sha()), (wt.branch, project.ref_sha(f"refs/heads/{wt.branch}"))):
        if sha is not None and not project.is_ancestor(sha, current):
            return f"its {label} {sha[:12]} is not merged into {current.removeprefix('refs/heads/')}"
    return None
