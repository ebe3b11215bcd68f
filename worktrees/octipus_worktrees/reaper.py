"""The orphan reaper's decisions (FACTS.md §1, "Reaper"; issue 15 items 3 and 6).

A worktree whose owner is alive, or that is younger than the minimum age, is skipped. Any other
is removed (through :meth:`~.lifecycle.WorktreeManager.remove`) only when it is clean and git
proves its HEAD and its branch are in the project's current branch; the rest are kept and the
reason reported. The record of a kept branch (its worktree already removed) is reported as kept
("unmerged branch octipus/<id> kept for review") until git proves the branch merged (it is then
deleted with ``git branch -d``) or it is gone: then the record is dropped (:mod:`.kept`).
Nothing unmerged or dirty is ever deleted. A dry run decides the same way and changes nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from octipusd.errors import NotFoundError, WorktreeError

from . import kept
from .git import Git
from .model import ReapAction, ReapReport, Worktree, WorktreeInfo, WorktreeState
from .owner import owner_alive

if TYPE_CHECKING:
    from .lifecycle import WorktreeManager

__all__ = ["MIN_AGE_S", "owner_alive", "reap", "reap_one", "state_of"]

#: Seconds a worktree must have existed (since its record or pid file was last written) before
#: the reaper considers it.
MIN_AGE_S: Final = 3600.0


def state_of(info: WorktreeInfo) -> WorktreeState:
    """``kept`` for a kept branch's record, else ``live`` while its owner is alive, else ``left``."""
    if info.kept:
        return WorktreeState.KEPT
    return WorktreeState.LIVE if owner_alive(info.owner_pid) else WorktreeState.LEFT


def reap(
    manager: WorktreeManager,
    now: float | None = None,
    min_age_s: float = MIN_AGE_S,
    *,
    dry_run: bool = False,
) -> list[ReapReport]:
    """Look at every recorded worktree under ``manager.root`` once and act (see the module).

    Args:
        manager: Whose root, ``remove`` and records are used.
        now: The time ages are measured at (seconds since the epoch; default now).
        min_age_s: Younger worktrees are skipped.
        dry_run: Decide only: nothing is removed, deleted or dropped, and each reason of an
            action not taken says "would".

    Returns:
        One report per worktree, by id. A git failure on one worktree keeps it (reported) and
        the others are still looked at; nothing raises.
    """
    at = time.time() if now is None else now
    reports = (reap_one(manager, info, at, min_age_s, dry_run=dry_run) for info in manager.list())
    return [report for report in reports if report is not None]


def reap_one(
    manager: WorktreeManager, info: WorktreeInfo, at: float, min_age_s: float, *, dry_run: bool = False
) -> ReapReport | None:
    """The reaper's decision on one worktree (and its action unless ``dry_run``); see :func:`reap`.

    A sweep holds the manager's lock of the id (:meth:`~.lifecycle.WorktreeManager.holding`) and
    reads the record again under it, so a person's merge or discard of it waits; a dry run does
    not. Never raises: a git failure is a ``kept`` report saying so.

    Returns:
        The report, or None when the record went away before the lock was taken.
    """
    wt = info.worktree
    try:
        if dry_run:
            action, reason = _decide(manager, info, at, min_age_s, dry_run=True)
        else:
            with manager.holding(wt.id):
                try:
                    fresh = manager.get(wt.id)  # as it is now, under the lock
                except NotFoundError:
                    return None  # finished meanwhile by its owner, or by a person
                action, reason = _decide(manager, fresh, at, min_age_s, dry_run=False)
    except WorktreeError as exc:
        action, reason = ReapAction.KEPT, f"git failed: {exc.message}"
    return ReapReport(id=wt.id, path=wt.path, action=action, reason=reason)


def _decide(
    manager: WorktreeManager, info: WorktreeInfo, at: float, min_age_s: float, *, dry_run: bool
) -> tuple[ReapAction, str]:
    wt = info.worktree
    if owner_alive(info.owner_pid):
        return ReapAction.SKIPPED_LIVE, f"its owner (pid {info.owner_pid}) is alive"
    if info.kept:  # removed already: no creation to race with, so no minimum age
        why = _project_problem(manager, wt)
        return (ReapAction.KEPT, why) if why else kept.settle_record(manager, info, dry_run=dry_run)
    age = at - _written_at(manager.root, wt.id)
    if age < min_age_s:
        return ReapAction.SKIPPED_YOUNG, f"{age:.0f} s old, under the {min_age_s:.0f} s minimum age"
    why = _why_kept(manager, wt)
    if why is not None:
        return ReapAction.KEPT, why
    if dry_run:
        return ReapAction.REMOVED, "clean and merged into the project: would be removed"
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


def _project_problem(manager: WorktreeManager, wt: Worktree) -> str | None:
    """Why ``wt``'s project cannot be looked at (gone, or not a non-bare repository), or None."""
    if not wt.project.is_dir():
        return f"its project {wt.project} is gone"
    bare = Git(wt.project, manager.limits).run("rev-parse", "--is-bare-repository")
    if not bare.ok or bare.stdout != "false":
        return f"{wt.project} is not a non-bare git repository"
    return None


def _why_kept(manager: WorktreeManager, wt: Worktree) -> str | None:
    """Why ``wt`` must not be removed, or None when it is clean and merged."""
    problem = _project_problem(manager, wt)
    if problem is not None:
        return problem
    project = Git(wt.project, manager.limits)
    if not wt.path.is_dir():
        return f"its directory {wt.path} is missing"
    if wt.path.resolve() not in manager.registered(project):
        return f"{wt.path} is not a worktree of {wt.project}"
    here = Git(wt.path, manager.limits)
    why = here.uncommitted()
    if why is not None:
        return why
    current = project.symbolic_head()
    if current is None:
        return f"{wt.project}'s HEAD is detached: nothing to be merged into"
    for label, sha in (("HEAD", here.head_sha()), (wt.branch, project.ref_sha(f"refs/heads/{wt.branch}"))):
        if sha is not None and not project.is_ancestor(sha, current):
            return f"its {label} {sha[:12]} is not merged into {current.removeprefix('refs/heads/')}"
    return None
