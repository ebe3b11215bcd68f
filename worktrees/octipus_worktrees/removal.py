"""What removing a child's worktree must keep (FACTS.md §1, "Removal"): its HEAD reachable from a
local branch, and its branch unless git proves it merged."""

from __future__ import annotations

from .git import Git
from .model import DETACHED_SUFFIX, Worktree

__all__ = ["delete_if_merged", "keep_reachable"]


def keep_reachable(project: Git, wt: Worktree, head: str) -> tuple[bool, str | None]:
    """Make ``head`` reachable from a local branch: whether it is, and the Octipus ref that
    keeps it (None when a branch other than ``octipus/<id>`` already contains it)."""
    ref = f"refs/heads/{wt.branch}"
    holders = project.read("for-each-ref", "--contains", head, "--format=%(refname)", "refs/heads").split()
    if any(holder != ref for holder in holders):
        return True, None
    if ref in holders:
        return True, wt.branch
    tip = project.ref_sha(ref)
    if tip is not None and project.is_ancestor(tip, head) and project.run("update-ref", ref, head, tip).ok:
        return True, wt.branch
    detached = wt.branch + DETACHED_SUFFIX
    if project.run("branch", "--no-track", detached, head, write=True).ok:
        return True, detached
    return False, None


def delete_if_merged(project: Git, branch: str) -> bool:
    """``git branch -d`` when the project's current branch contains ``branch``'s tip."""
    current, tip = project.symbolic_head(), project.ref_sha(f"refs/heads/{branch}")
    if current is None or tip is None or not project.is_ancestor(tip, current):
        return False
    return project.run("branch", "-d", branch, write=True).ok
