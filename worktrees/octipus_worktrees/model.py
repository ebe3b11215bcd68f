"""The vocabulary of child worktrees: ids, where they live, merge outcomes and the report."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from octipusd.errors import InvalidRequestError

__all__ = [
    "BRANCH_PREFIX",
    "ID_PATTERN",
    "ROOT_ENV",
    "SHA_PATTERN",
    "DiscardOutcome",
    "MergeOutcome",
    "ReapAction",
    "ReapReport",
    "RemoveOutcome",
    "Worktree",
    "WorktreeInfo",
    "WorktreeReport",
    "WorktreeState",
    "check_id",
    "default_root",
]

#: A worktree id (the spawner uses ``c`` plus 20 hex digits).
ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
#: A commit id as git prints it (SHA-1 or SHA-256).
SHA_PATTERN: Final = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: Each child's branch is ``octipus/<id>``; a HEAD kept off it gets ``octipus/<id>-detached``.
BRANCH_PREFIX: Final = "octipus/"
DETACHED_SUFFIX: Final = "-detached"
#: Relocates the worktrees root, honoured only when absolute.
ROOT_ENV: Final = "OCTIPUS_WORKTREES_DIR"


def default_root(environ: Mapping[str, str] | None = None) -> Path:
    """``$OCTIPUS_WORKTREES_DIR`` when it is an absolute path, else ``~/.octipus/worktrees``."""
    env = os.environ if environ is None else environ
    value = env.get(ROOT_ENV, "")
    return Path(value) if value and os.path.isabs(value) else Path.home() / ".octipus" / "worktrees"


def check_id(worktree_id: str) -> str:
    """Return ``worktree_id`` when it matches :data:`ID_PATTERN`.

    Raises:
        InvalidRequestError: it does not (it would name a path or a ref Octipus does not own).
    """
    if not ID_PATTERN.fullmatch(worktree_id):
        raise InvalidRequestError(
            f"worktree id {worktree_id!r} is not valid: 1-64 letters, digits, '_' or '-', "
            "starting with a letter or digit"
        )
    return worktree_id


class MergeOutcome(StrEnum):
    """What became of a child's branch at finish (FACTS.md §1, "Finish" and "Merge checks")."""

    MERGED = "merged"
    CONFLICT = "conflict"
    FAILED = "failed"
    NO_CHANGES = "no_changes"
    SKIPPED_DETACHED = "skipped_detached"
    SKIPPED_DIRTY = "skipped_dirty"
    SKIPPED_MOVED = "skipped_moved"
    SKIPPED_STATUS = "skipped_status"
    SKIPPED_OTHER_ATTEMPT = "skipped_other_attempt"


@dataclass(frozen=True)
class Worktree:
    """One child's worktree: where it is, which repository and branch, and where it started.

    Attributes:
        id: The worktree id (:data:`ID_PATTERN`).
        path: ``<root>/<id>``.
        project: Real path of the repository's top level it was made from.
        branch: ``octipus/<id>``.
        base_sha: The project's HEAD when the worktree was made.
        included: Paths (relative, ``/``-separated) copied in from the project's
            ``.worktreeinclude`` at creation; empty for a reused or listed worktree.
        node_modules_linked: ``<path>/node_modules`` was made a symlink to the project's.
    """

    id: str
    path: Path
    project: Path
    branch: str
    base_sha: str
    included: tuple[str, ...] = ()
    node_modules_linked: bool = False


@dataclass(frozen=True)
class RemoveOutcome:
    """What removal did (FACTS.md §1, "Removal").

    Attributes:
        removed: The directory and its git registration are gone.
        branch_deleted: ``octipus/<id>`` was deleted with ``git branch -d``.
        kept_ref: The Octipus ref that holds the worktree's work, when one is kept
            (``octipus/<id>`` or ``octipus/<id>-detached``).
        detail: Why it was not removed, or what was done, for a person.
    """

    removed: bool
    branch_deleted: bool
    kept_ref: str | None
    detail: str


@dataclass(frozen=True)
class WorktreeReport:
    """What a child's receipt says of its worktree; :meth:`to_dict` gives the API's names."""

    branch: str
    worktree_path: Path
    base_sha: str
    head_sha: str
    diff_stat: str
    files_changed: int
    merge: MergeOutcome
    branch_kept: bool
    merge_detail: str | None = None
    kept_ref: str | None = None

    def to_dict(self) -> dict[str, object]:
        """``{branch, worktreePath, baseSha, headSha, diffStat, filesChanged, merge,
        mergeDetail?, branchKept, keptRef?}`` (the optional ones only when set)."""
        body: dict[str, object] = {
            "branch": self.branch,
            "worktreePath": str(self.worktree_path),
            "baseSha": self.base_sha,
            "headSha": self.head_sha,
            "diffStat": self.diff_stat,
            "filesChanged": self.files_changed,
            "merge": str(self.merge),
        }
        if self.merge_detail is not None:
            body["mergeDetail"] = self.merge_detail
        body["branchKept"] = self.branch_kept
        if self.kept_ref is not None:
            body["keptRef"] = self.kept_ref
        return body


class WorktreeState(StrEnum):
    """Where a recorded worktree stands, for a person (``octipusctl worktrees``).

    ``live``: its owning process is alive. ``left``: it is not kept and its owner is gone (or
    unknown): a crash left it, or its child is finishing. ``kept``: the worktree was removed and
    the record stays for the branch that holds unmerged work (``octipus/<id>`` or
    ``octipus/<id>-detached``), until it is merged, discarded or gone.
    """

    LIVE = "live"
    LEFT = "left"
    KEPT = "kept"


@dataclass(frozen=True)
class WorktreeInfo:
    """One worktree under the root, as :meth:`WorktreeManager.list` finds it.

    Attributes:
        worktree: Its record (id, path, project, branch, base).
        owner_pid: The pid in ``<root>/<id>.pid``, or None when there is none or it is unreadable.
        exists: Whether its directory is there.
        kept_ref: For a kept record (the worktree removed, its work unmerged), the ref holding
            the work; None otherwise.
    """

    worktree: Worktree
    owner_pid: int | None
    exists: bool
    kept_ref: str | None = None

    @property
    def kept(self) -> bool:
        """Whether this is the record of a removed worktree whose branch is kept for review."""
        return self.kept_ref is not None


class ReapAction(StrEnum):
    """What the reaper did with one worktree (FACTS.md §1, "Reaper")."""

    REMOVED = "removed"
    KEPT = "kept"
    DROPPED = "dropped"  # a kept branch's record, once git proved it merged or its ref gone
    SKIPPED_LIVE = "skipped_live"
    SKIPPED_YOUNG = "skipped_young"


@dataclass(frozen=True)
class ReapReport:
    """One worktree the reaper looked at.

    Attributes:
        id: The worktree id.
        path: ``<root>/<id>``.
        action: What was done.
        reason: Why, for a person.
    """

    id: str
    path: Path
    action: ReapAction
    reason: str


@dataclass(frozen=True)
class DiscardOutcome:
    """What :meth:`WorktreeManager.discard` deleted.

    Attributes:
        id: The worktree id.
        deleted: Each Octipus ref deleted, with the commit it pointed at (recoverable with
            ``git branch <name> <sha>`` until git collects it).
        worktree_removed: The (clean) worktree directory was still there and was removed.
        detail: What was done, for a person.
    """

    id: str
    deleted: dict[str, str]
    worktree_removed: bool
    detail: str
