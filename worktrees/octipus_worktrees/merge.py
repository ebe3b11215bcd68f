"""Merging a child's branch into the project's current branch (FACTS.md §1, "Merge checks")."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .git import GIT_LIMITS, Git, GitLimits
from .model import MergeOutcome, Worktree

__all__ = ["merge_branch", "repo_lock"]

_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


@contextmanager
def repo_lock(project: Path) -> Iterator[None]:
    """Hold the one merge lock of a repository, keyed by its real path (one merge at a time)."""
    key = os.path.realpath(project)
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(key, threading.Lock())
    with lock:
        yield


def merge_branch(wt: Worktree, limits: GitLimits = GIT_LIMITS) -> tuple[MergeOutcome, str]:
    """Merge ``wt.branch`` into the project's current branch when the project is safe to merge into.

    The checks run in order, under :func:`repo_lock`: the project is on a branch
    (``skipped_detached``); it has no tracked change and no merge, rebase, cherry-pick or revert
    in progress (``skipped_dirty``; untracked files do not count); ``wt.base_sha`` is an ancestor
    of its HEAD (``skipped_moved``). Then ``git merge --no-ff --no-edit``: ``merged`` (detail: the
    branch); a failure that leaves ``MERGE_HEAD`` is aborted and is a ``conflict`` (detail: the
    conflicting files); a refusal before starting is ``failed`` (detail: git's stderr, cut). The
    worktree directory is not needed, so a kept branch can be merged after removal.

    Returns:
        The outcome and its detail, for a person.

    Raises:
        WorktreeError: git could not run or timed out, or ``merge --abort`` failed (the project
            is left mid-merge and the message says so).
    """
    project = Git(wt.project, limits)
    with repo_lock(wt.project):
        if project.symbolic_head() is None:
            return MergeOutcome.SKIPPED_DETACHED, f"{wt.project} is not on a branch (detached HEAD)"
        in_progress = project.operation_in_progress()
        if in_progress is not None or project.tracked_changes():
            why = f"{in_progress} is present" if in_progress else "it has uncommitted tracked changes"
            return MergeOutcome.SKIPPED_DIRTY, f"{wt.project} is not safe to merge into: {why}"
        head = project.head_sha()
        if head is None or not project.is_ancestor(wt.base_sha, head):
            return MergeOutcome.SKIPPED_MOVED, f"the base {wt.base_sha[:12]} is no longer an ancestor of HEAD"
        if project.ref_sha(f"refs/heads/{wt.branch}") is None:
            return MergeOutcome.FAILED, f"branch {wt.branch} does not exist"
        result = project.run("merge", "--no-ff", "--no-edit", wt.branch, write=True)
        if result.ok:
            return MergeOutcome.MERGED, wt.branch
        if project.ref_sha("MERGE_HEAD") is not None:
            conflicted = project.run("diff", "--name-only", "--diff-filter=U").stdout.split()
            project.write("merge", "--abort")
            files = ", ".join(conflicted) or project.quote(result.stdout)
            return MergeOutcome.CONFLICT, project.quote(f"merge aborted, branch {wt.branch} kept: {files}")
        return MergeOutcome.FAILED, project.quote(result.stderr or result.stdout)
