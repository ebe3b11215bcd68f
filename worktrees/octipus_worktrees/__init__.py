"""Git worktree per coding child (seed 003 "Optional git worktree per coding child", FACTS.md §1).

A capability: it imports only the foundations. :class:`WorktreeManager` checks whether a
project can give a child a worktree, creates ``<root>/<id>`` on ``octipus/<id>``, reuses it for
retries, and at finish commits, reports, merges (one merge per repository at a time) and
removes it without ever losing a commit or an uncommitted change; its reaper (:mod:`.reaper`)
removes only clean, merged, ownerless ones. A branch kept unmerged stays listed until a person
reviews, merges or discards it, or git proves it merged or gone (:mod:`.kept`). New worktrees get ``node_modules`` linked and the
``.worktreeinclude`` files copied (:mod:`.extras`). Git runs with hooks,
fsmonitor and signing off (:mod:`.git`).
"""

from .extras import EXCLUDE_COMMENT, INCLUDE_FILE
from .git import AGENT_EMAIL, AGENT_NAME, GIT_LIMITS, GitLimits, printable
from .lifecycle import COMMIT_MESSAGE, WorktreeManager
from .merge import merge_branch
from .model import (
    ID_PATTERN,
    DiscardOutcome,
    MergeOutcome,
    ReapAction,
    ReapReport,
    RemoveOutcome,
    Worktree,
    WorktreeInfo,
    WorktreeReport,
    WorktreeState,
    check_id,
    default_root,
)
from .owner import owner_alive
from .reaper import MIN_AGE_S, reap_one, state_of

__all__ = [
    "AGENT_EMAIL",
    "AGENT_NAME",
    "COMMIT_MESSAGE",
    "EXCLUDE_COMMENT",
    "GIT_LIMITS",
    "ID_PATTERN",
    "INCLUDE_FILE",
    "MIN_AGE_S",
    "DiscardOutcome",
    "GitLimits",
    "MergeOutcome",
    "ReapAction",
    "ReapReport",
    "RemoveOutcome",
    "Worktree",
    "WorktreeInfo",
    "WorktreeManager",
    "WorktreeReport",
    "WorktreeState",
    "check_id",
    "default_root",
    "merge_branch",
    "owner_alive",
    "printable",
    "reap_one",
    "state_of",
]
