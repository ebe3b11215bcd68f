"""Where a child agent works: the shared tree, its parent's worktree, or a git worktree of its own.

Seed 003 "Optional git worktree per coding child" (FACTS.md §1). While ``swarm.worktreeIsolation``
is on, a ``coding`` child (every Octipus adapter is a CLI adapter) gets its own worktree
``<root>/<id>`` on ``octipus/<id>`` when its session's workspace is a repository root with no
uncommitted tracked change and no operation in progress, and its spawner is not itself in a
worktree; a descendant of a worktree child works in that worktree and never gets one of its own.
Otherwise, or when creation fails, the child runs on the shared tree and its receipt says why.

One :class:`ChildTree` serves a spawned child across its contract retries (they reuse the
worktree); :func:`finish_tree` commits, reports, merges when the child ended ok, and removes it.
Git runs in worker threads (the library is blocking); creation and the merge of one repository
are serialised by :func:`octipus_worktrees.merge.repo_lock`.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
from octipus_worktrees import MergeOutcome, Worktree, WorktreeManager
from octipus_worktrees.merge import repo_lock

from octipusd.errors import OctipusError
from octipusd.store.aio import in_thread

if TYPE_CHECKING:
    from octipusd.runtime.supervisor import RunSupervisor

__all__ = [
    "CODING_ROLE",
    "WORKTREE_WATCH_S",
    "ChildTree",
    "finish_tree",
    "prepare_tree",
    "tree_notes",
    "watch_tree",
]

log = logging.getLogger("octipusd.runtime.child_tree")

#: The only role whose children get a worktree of their own.
CODING_ROLE: Final = "coding"
#: How often a live child's worktree is checked to still be there (seconds).
WORKTREE_WATCH_S: Final = 1.0


@dataclass
class ChildTree:
    """The working tree of one spawned child (and of its contract retries).

    Attributes:
        worktree: The child's own worktree, or None.
        inherited: The worktree of a worktree ancestor this child works in, or None.
        skipped: Why the child has no worktree of its own (for its receipt), or None when it has one.
        setup: The ``swarm.worktreeSetupCommand`` report (``command``, ``exitCode``, ``output``), or None.
    """

    worktree: Worktree | None = None
    inherited: Path | None = None
    skipped: str | None = None
    setup: dict[str, Any] | None = None

    @property
    def path(self) -> Path | None:
        """The directory the child works in instead of the session's workspace, or None (shared tree)."""
        if self.worktree is not None:
            return self.worktree.path
        return self.inherited


def _new_id() -> str:
    """A worktree id as the original's spawner makes them: ``c`` and 20 hex digits."""
    return "c" + secrets.token_hex(10)


async def prepare_tree(parent: RunSupervisor, role: str) -> ChildTree:
    """Decide where a child of ``parent`` with ``role`` works, creating its worktree when it gets one.

    Never raises for the worktree: an ineligible project or a failed creation leaves the child on
    the shared tree with the reason in :attr:`ChildTree.skipped` (a failure is logged).

    Args:
        parent: The spawning run (live; its identity names its workspace).
        role: The child's role.
    """
    if parent.tree is not None:  # descendants of a worktree child reuse its worktree
        return ChildTree(inherited=parent.tree, skipped=f"it works in its parent's worktree {parent.tree}")
    services = parent.services
    swarm = services.swarm
    if not swarm.worktreeIsolation:
        return ChildTree(skipped="swarm.worktreeIsolation is off")
    if role != CODING_ROLE:
        return ChildTree(skipped=f"its role is {role}; only coding children get a worktree")
    assert parent.identity is not None, "a live parent has its identity"
    project = Path(parent.identity.workspace)
    manager = services.worktrees
    try:
        worktree = await in_thread(
            _eligible_create, manager, project, _new_id(), swarm.worktreeLinkNodeModules
        )
    except OctipusError as exc:
        log.warning("no worktree for a child of run %s: %s", parent.run.id, exc.message)
        return ChildTree(skipped=f"its worktree could not be created: {exc.message}")
    except OSError as exc:  # the worktrees root or its pid file could not be written
        log.warning("no worktree for a child of run %s: %s", parent.run.id, exc)
        return ChildTree(skipped=f"its worktree could not be created: {exc}")
    if isinstance(worktree, str):
        return ChildTree(skipped=worktree)
    return ChildTree(worktree=worktree)


def _eligible_create(manager: WorktreeManager, project: Path, worktree_id: str, link: bool) -> Worktree | str:
    """Check ``project`` and create the worktree under the repository's lock; the reason when ineligible."""
    with repo_lock(project):
        why = manager.eligible(project)
        if why is not None:
            return why
        return manager.create(project, worktree_id, link_node_modules=link)


async def watch_tree(child: RunSupervisor, path: Path) -> None:
    """Halt ``child`` once ``path`` (its worktree) is gone, so it never falls through to the parent
    checkout; returns then. The caller cancels it when the child ends."""
    while True:
        await anyio.sleep(WORKTREE_WATCH_S)
        if not await anyio.Path(path).is_dir() and child.ending is None:
            child.fail(
                f"its worktree {path} was removed while it ran; the child was halted so it does not "
                "work in another checkout"
            )
            return


async def finish_tree(manager: WorktreeManager, tree: ChildTree, *, ok: bool) -> dict[str, Any] | None:
    """Finish the child's own worktree: commit, report, merge when ``ok``, remove (FACTS.md §1).

    Args:
        manager: The daemon's worktree manager.
        tree: The child's tree; nothing is done without a worktree of its own.
        ok: The child ended ok from an attempt that ran in the worktree (and passed its gates).

    Returns:
        The receipt's ``worktree`` object (:meth:`~octipus_worktrees.WorktreeReport.to_dict` plus
        ``id``, ``project``, ``included``, ``nodeModulesLinked`` and ``leftInPlace``: the directory is
        still there because removal was refused), or None without a worktree. A
        git failure is reported as merge ``failed`` with the error, the worktree left for the reaper.
    """
    worktree = tree.worktree
    if worktree is None:
        return None
    extra = {
        "id": worktree.id,
        "project": str(worktree.project),
        "included": list(worktree.included),
        "nodeModulesLinked": worktree.node_modules_linked,
    }
    try:
        report = await in_thread(
            lambda: manager.finish(worktree, merge=ok, reason=None if ok else MergeOutcome.SKIPPED_STATUS)
        )
    except (OctipusError, OSError) as exc:  # git, or a record file that could not be written
        message = exc.message if isinstance(exc, OctipusError) else str(exc)
        log.warning("finishing worktree %s failed: %s", worktree.id, message)
        return {
            **extra,
            "branch": worktree.branch,
            "worktreePath": str(worktree.path),
            "baseSha": worktree.base_sha,
            "merge": str(MergeOutcome.FAILED),
            "mergeDetail": f"finishing the worktree failed ({message}); it is left in place for the reaper",
            "branchKept": True,
            "keptRef": worktree.branch,
            "leftInPlace": True,
        }
    left = await anyio.Path(worktree.path).is_dir()
    return {**extra, **report.to_dict(), "leftInPlace": left}


def tree_notes(worktree: dict[str, Any] | None, not_merged_because: str | None) -> list[str]:
    """What the child's result notes say of its worktree: where unmerged work is, where a worktree
    was left. ``not_merged_because``: why no merge was asked (the child failed, was stopped, did
    not pass its gates), or None when it was."""
    if worktree is None:
        return []
    notes: list[str] = []
    merge = worktree.get("merge")
    if merge == str(MergeOutcome.MERGED):
        notes.append(f"merged {worktree['branch']} into the project")
    elif merge != str(MergeOutcome.NO_CHANGES):
        ref = worktree.get("keptRef") or worktree["branch"]
        detail = worktree.get("mergeDetail")
        why = not_merged_because or (f"{merge}: {detail}" if detail else str(merge))
        notes.append(f"NOT merged: its work is on {ref} ({why})")
    if worktree.get("leftInPlace"):
        notes.append(f"its worktree {worktree['worktreePath']} was left in place (see mergeDetail)")
    return notes
