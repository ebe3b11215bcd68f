"""Git worktree per coding child (seed 003 "Optional git worktree per coding child", FACTS.md §1).

A capability: it imports only the foundations. :class:`WorktreeManager` checks whether a
project can give a child a worktree, creates ``<root>/<id>`` on ``octipus/<id>``, reuses it for
retries, and at finish commits, reports, merges (one merge per repository at a time) and
removes it without ever losing a commit or an uncommitted change. Git runs with hooks,
fsmonitor and signing off (:mod:`.git`).
"""

from .git import AGENT_EMAIL, AGENT_NAME, GIT_LIMITS, GitLimits
from .lifecycle import COMMIT_MESSAGE, WorktreeManager
from .merge import merge_branch
from .model import (
    ID_PATTERN,
    MergeOutcome,
    RemoveOutcome,
    Worktree,
    WorktreeInfo,
    WorktreeReport,
    check_id,
    default_root,
)

__all__ = [
    "AGENT_EMAIL",
    "AGENT_NAME",
    "COMMIT_MESSAGE",
    "GIT_LIMITS",
    "ID_PATTERN",
    "GitLimits",
    "MergeOutcome",
    "RemoveOutcome",
    "Worktree",
    "WorktreeInfo",
    "WorktreeManager",
    "WorktreeReport",
    "check_id",
    "default_root",
    "merge_branch",
]
