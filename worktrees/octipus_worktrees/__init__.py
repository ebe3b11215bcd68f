"""Git worktree per coding child (seed 003 "Optional git worktree per coding child", FACTS.md §1).

A capability: it imports only the foundations. :class:`WorktreeManager` checks whether a
project can give a child a worktree, creates ``<root>/<id>`` on ``octipus/<id>``, reuses it for
retries, and at finish commits, reports, merges (one merge per repository at a time) and
removes it without ever losing a commit or an uncommitted change; its reaper (:mod:`.reaper`)
removes only clean, merged, ownerless ones. New worktrees get ``node_modules`` linked and the
``.worktreeinclude`` files copied (:mod:`.extras`). Git runs with hooks,
fsmonitor and signing off (:mod:`.git`).
"""

from .extras import EXCLUDE_COMMENT, INCLUDE_FILE
from .git import AGENT_EMAIL, AGENT_NAME, GIT_LIMITS, GitLimits
from .lifecycle import COMMIT_MESSAGE, WorktreeManager
from .merge import merge_branch
from .model import (
    ID_PATTERN,
    MergeOutcome,
    ReapAction,
    ReapReport,
    RemoveOutcome,
    Worktree,
    WorktreeInfo,
    WorktreeReport,
    check_id,
    default_root,
)
from .reaper import MIN_AGE_S, owner_alive

__all__ = [
    "AGENT_EMAIL",
    "AGENT_NAME",
    "COMMIT_MESSAGE",
    "EXCLUDE_COMMENT",
    "GIT_LIMITS",
    "ID_PATTERN",
    "INCLUDE_FILE",
    "MIN_AGE_S",
    "GitLimits",
    "MergeOutcome",
    "ReapAction",
    "ReapReport",
    "RemoveOutcome",
    "Worktree",
    "WorktreeInfo",
    "WorktreeManager",
    "WorktreeReport",
    "check_id",
    "default_root",
    "merge_branch",
    "owner_alive",
]
