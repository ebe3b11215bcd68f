"""A child's branch kept for review after its worktree was removed (issue 15 item 6).

A kept record (``"kept": true`` in ``<root>/<id>.json``) stands for the Octipus refs of one id:
its kept ref (``octipus/<id>``, or ``octipus/<id>-detached`` when the worktree's HEAD had left
the branch) and ``octipus/<id>`` itself. A person reviews them (:func:`diff`), merges the kept ref
(:func:`merge`) or discards them (:func:`discard`); the reaper (:func:`settle_record`) drops the
record once git proves every one of them merged into the project's current branch (deleting
them with ``git branch -d``) or gone. Nothing unmerged is deleted except by :func:`discard`,
which a person asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

from octipusd.errors import ConflictError, NotFoundError

from .git import Git, printable
from .merge import merge_branch
from .model import DiscardOutcome, MergeOutcome, ReapAction, Worktree, WorktreeInfo
from .owner import owner_alive
from .removal import delete_if_merged

if TYPE_CHECKING:
    from .lifecycle import WorktreeManager

__all__ = ["diff", "discard", "merge", "refs_of", "settle", "settle_record"]

#: Characters of a commit id shown to a person.
SHORT_SHA = 12


def refs_of(wt: Worktree, kept_ref: str | None) -> tuple[str, ...]:
    """The Octipus refs one record stands for: the kept ref first, then ``octipus/<id>``."""
    return tuple(dict.fromkeys([kept_ref or wt.branch, wt.branch]))


def _refuse_live(info: WorktreeInfo, doing: str) -> None:
    if owner_alive(info.owner_pid):
        raise ConflictError(
            f"worktree {info.worktree.id} is held by a live process (pid {info.owner_pid}); it cannot be "
            f"{doing} until its child has finished"
        )


def diff(manager: WorktreeManager, info: WorktreeInfo) -> str:
    """The diff of the ref holding ``info``'s work against its base: ``git diff base...ref``.

    The kept ref of a kept record, else ``octipus/<id>`` (its committed work only). External diff
    drivers and text conversions are off; bytes that are not UTF-8 become U+FFFD; past
    :attr:`~.git.GitLimits.diff_chars` the text is cut and the cut is said on its last line.

    Raises:
        NotFoundError: the ref is gone.
        WorktreeError: the project is gone, or git failed or timed out.
    """
    wt = info.worktree
    ref = info.kept_ref or wt.branch
    project = Git(wt.project, manager.limits)
    if project.ref_sha(f"refs/heads/{ref}") is None:
        raise NotFoundError(f"branch {ref} of worktree {wt.id} no longer exists in {wt.project}")
    text = printable(
        project.read(
            "diff", "--no-color", "--no-ext-diff", "--no-textconv", f"{wt.base_sha}...refs/heads/{ref}", "--"
        )
    )
    limit = manager.limits.diff_chars
    if len(text) > limit:
        text = (
            text[:limit] + f"\n[diff cut at {limit} characters; see the rest with "
            f"`git -C {wt.project} diff {wt.base_sha[:SHORT_SHA]}...{ref}`]"
        )
    return text


def settle(project: Git, refs: Iterable[str]) -> tuple[list[str], list[str]]:
    """Delete (``git branch -d``) each ref git proves merged into the project's current branch.

    Returns:
        The refs deleted, and the refs that exist and were not deleted (not merged, or git
        refused, e.g. the branch is checked out somewhere); refs that do not exist are in neither.
    """
    deleted: list[str] = []
    remaining: list[str] = []
    for ref in refs:
        if project.ref_sha(f"refs/heads/{ref}") is None:
            continue
        (deleted if delete_if_merged(project, ref) else remaining).append(ref)
    return deleted, remaining


def settle_record(manager: WorktreeManager, info: WorktreeInfo, *, dry_run: bool) -> tuple[ReapAction, str]:
    """The reaper's decision on a kept record (its owner is not alive; the project is a
    non-bare repository): dropped when every ref is merged (deleted with ``-d``) or gone, else kept.

    With ``dry_run`` nothing is deleted and the reason says what would be done.
    """
    wt = info.worktree
    project = Git(wt.project, manager.limits)
    current = project.symbolic_head()
    into = current.removeprefix("refs/heads/") if current else None
    tips = {ref: project.ref_sha(f"refs/heads/{ref}") for ref in refs_of(wt, info.kept_ref)}
    existing = {ref: tip for ref, tip in tips.items() if tip is not None}
    unmerged = [
        ref for ref, tip in existing.items() if current is None or not project.is_ancestor(tip, current)
    ]
    if unmerged:
        where = "" if into else f" ({wt.project}'s HEAD is detached: nothing proves it merged)"
        return ReapAction.KEPT, f"unmerged branch {unmerged[0]} kept for review{where}"
    what = f"kept branch {', '.join(existing)} is merged into {into}" if existing else "its kept ref is gone"
    if dry_run:
        return ReapAction.DROPPED, f"{what}: would delete it and drop the record" if existing else (
            f"{what}: would drop the record"
        )
    _, remaining = settle(project, existing)
    if remaining:
        return ReapAction.KEPT, f"{what}, but git did not delete {', '.join(remaining)}; kept"
    if not manager.drop_kept_record(wt.id):
        return ReapAction.KEPT, f"{what}, but its record changed meanwhile (made again?); left as is"
    done = "deleted with git branch -d, record dropped" if existing else "record dropped"
    return ReapAction.DROPPED, f"{what}: {done}"


def _to_kept(manager: WorktreeManager, info: WorktreeInfo) -> str | None:
    """Remove a record's worktree safely (:meth:`~.lifecycle.WorktreeManager.remove`) unless it is
    already kept; return the ref that holds its work (None: nothing left, all merged).

    Raises:
        ConflictError: the worktree cannot be removed safely (uncommitted changes...).
    """
    if info.kept:
        return info.kept_ref
    removal = manager.remove(info.worktree)
    if not removal.removed:
        raise ConflictError(f"worktree {info.worktree.id} cannot be merged yet: {removal.detail}")
    return removal.kept_ref


def merge(manager: WorktreeManager, info: WorktreeInfo) -> tuple[MergeOutcome, str]:
    """Merge the ref holding ``info``'s work into the project's current branch.

    A worktree still recorded as such (its child gone) is first removed the safe way (never with
    uncommitted changes; its HEAD kept reachable) and its record becomes a kept one. The merge
    is :func:`~.merge.merge_branch` (same checks and outcomes, under the repository's merge
    lock). ``merged``: every ref of the record git proves merged is deleted with ``git branch
    -d`` and the record dropped (a ref left unmerged stays recorded as the kept ref). Any other
    outcome (a conflict is aborted) keeps the branch and the record.

    Returns:
        The outcome and its detail for a person (``no_changes`` when nothing was left to merge).

    Raises:
        ConflictError: its owner is alive, its project is gone, or its worktree cannot be
            removed safely.
        WorktreeError: git failed or timed out.
    """
    _refuse_live(info, "merged")
    wt = info.worktree
    if not wt.project.is_dir():
        raise ConflictError(f"the project {wt.project} of worktree {wt.id} is gone: nothing to merge into")
    ref = _to_kept(manager, info)
    if ref is None:
        return MergeOutcome.NO_CHANGES, f"nothing to merge: {wt.branch} was already merged and is deleted"
    outcome, detail = merge_branch(dataclasses.replace(wt, branch=ref), manager.limits)
    if outcome is not MergeOutcome.MERGED:
        return outcome, detail
    project = Git(wt.project, manager.limits)
    into = (project.symbolic_head() or "HEAD").removeprefix("refs/heads/")
    deleted, remaining = settle(project, refs_of(wt, ref))
    said = f"merged {ref} into {into}"
    if deleted:
        said += f"; deleted {', '.join(deleted)} (git branch -d)"
    if owner_alive(manager.owner(wt.id)):  # made again meanwhile: its record is its own
        return outcome, f"{said}; worktree {wt.id} is being made again, its record is left as is"
    if remaining:
        manager.write_record(wt, remaining[0])
        return outcome, f"{said}; {', '.join(remaining)} not merged, kept for review"
    manager.drop_kept_record(wt.id)
    return outcome, f"{said}; record dropped"


def discard(manager: WorktreeManager, info: WorktreeInfo) -> DiscardOutcome:
    """Delete the Octipus refs of ``info`` with ``git branch -D`` and remove its clean worktree.

    ``-D`` deletes unmerged work: it is used here only because a person asked (``octipusctl
    worktrees discard ID --yes``, ``POST /v1/worktrees/{id}/discard`` with ``confirm``). Refused
    while the owner is alive or the worktree directory has uncommitted changes (untracked files
    count); a directory that is not a worktree of the project is refused too. The deleted refs'
    commits are named, so they can be restored (``git branch NAME SHA``) until git collects
    them. A project that is gone takes its refs with it: only the record is dropped.

    Raises:
        ConflictError: refused (see above), or git refused to delete a ref (the message says
            which were deleted before).
        WorktreeError: git failed or timed out.
    """
    _refuse_live(info, "discarded")
    wt = info.worktree
    if not wt.project.is_dir():
        manager.forget(wt.id)
        left = f"; its directory {wt.path} is left as it is" if wt.path.exists() else ""
        return DiscardOutcome(wt.id, {}, False, f"its project {wt.project} is gone; record dropped{left}")
    project = Git(wt.project, manager.limits)
    removed, head_note = _remove_clean(manager, project, wt) if wt.path.is_dir() else (False, "")
    project.write("worktree", "prune")
    deleted: dict[str, str] = {}
    for ref in refs_of(wt, info.kept_ref):
        sha = project.ref_sha(f"refs/heads/{ref}")
        if sha is None:
            continue
        result = project.run("branch", "-D", ref, write=True)
        if not result.ok:
            done = ", ".join(f"{name} (was {tip})" for name, tip in deleted.items()) or "nothing"
            raise ConflictError(
                f"git refused to delete {ref}: {project.quote(result.stderr)}; deleted before: {done}"
            )
        deleted[ref] = sha
    manager.forget(wt.id)  # unless the id is being made again meanwhile
    parts = [f"deleted {name} (was {tip})" for name, tip in deleted.items()] or ["no ref was left"]
    if removed:
        parts.append(f"removed worktree {wt.path}{head_note}")
    return DiscardOutcome(wt.id, deleted, removed, "; ".join(parts))


def _remove_clean(manager: WorktreeManager, project: Git, wt: Worktree) -> tuple[bool, str]:
    """Remove ``wt``'s directory when it is a clean worktree of the project, else refuse."""
    if wt.path.resolve() not in manager.registered(project):
        raise ConflictError(f"{wt.path} is not a worktree of {wt.project}; nothing was discarded")
    here = Git(wt.path, manager.limits)
    why = here.uncommitted()
    if why is not None:
        raise ConflictError(f"worktree {wt.path} is not discarded: {why}; commit or delete them first")
    head = here.head_sha()
    project.write("worktree", "remove", "--force", str(wt.path))
    return True, f" (its HEAD was {head})" if head else ""
