"""A coding child's worktree from creation to removal (FACTS.md §1, "Worktree per coding child").

Layout under the root (:func:`~.model.default_root`): ``<id>/`` the worktree, ``<id>.pid`` the
owning process (written before git runs, for the reaper), ``<id>.json`` the record (project,
branch, base) that :meth:`WorktreeManager.reuse` and :meth:`WorktreeManager.list` read, and
``.stale/`` for stale directories set aside (see :meth:`WorktreeManager.create`).

When a worktree is removed but its branch is kept (unmerged work), the record stays, marked
``"kept": true`` with the ``"keptRef"`` holding the work, so the branch stays listable; a person
then reviews it (:meth:`WorktreeManager.diff`), merges it (:meth:`WorktreeManager.merge_kept`)
or discards it (:meth:`WorktreeManager.discard`), and the reaper drops the record once git
proves the branch merged or it is gone (:mod:`.kept`).
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError, WorktreeError

from . import extras, kept
from .git import GIT_LIMITS, Git, GitLimits
from .merge import merge_branch
from .model import (
    BRANCH_PREFIX,
    DETACHED_SUFFIX,
    SHA_PATTERN,
    DiscardOutcome,
    MergeOutcome,
    ReapReport,
    RemoveOutcome,
    Worktree,
    WorktreeInfo,
    WorktreeReport,
    check_id,
)
from .owner import owner_alive, read_owner, write_owner
from .reaper import MIN_AGE_S, reap
from .removal import delete_if_merged, keep_reachable

__all__ = ["COMMIT_MESSAGE", "WorktreeManager"]

#: The message of the commit that saves a child's uncommitted work at finish.
COMMIT_MESSAGE = "octipus: uncommitted work from swarm child {id}"


class WorktreeManager:
    """Creates, finishes, merges and removes the worktrees under one root.

    Blocking (git runs as subprocesses); an async caller runs it in a worker thread. Merges into
    one repository are serialised across threads (:func:`~.merge.repo_lock`).

    Args:
        root: The worktrees root (``~/.octipus/worktrees`` or ``OCTIPUS_WORKTREES_DIR``).
        limits: Git deadlines.
    """

    def __init__(self, root: Path, limits: GitLimits = GIT_LIMITS) -> None:
        self.root = root
        self.limits = limits
        self._id_locks: dict[str, threading.Lock] = {}
        self._id_locks_guard = threading.Lock()

    @contextmanager
    def holding(self, worktree_id: str) -> Iterator[None]:
        """Hold this manager's lock of one worktree id: the reaper's sweep of it, a merge or a
        discard of its kept branch run one at a time (across threads)."""
        with self._id_locks_guard:
            lock = self._id_locks.setdefault(worktree_id, threading.Lock())
        with lock:
            yield

    # ------------------------------------------------------------------ eligibility, creation

    def eligible(self, project: Path) -> str | None:
        """Why ``project`` cannot give a child a worktree, or None when it can (git's conditions).

        The project must be a repository's top level with a commit, no tracked change and no
        merge (or rebase, cherry-pick, revert) in progress. Role, adapter, dev mode and the
        spawner's own worktree are the caller's conditions.
        """
        if not project.is_dir():
            return f"{project} is not a directory"
        git = Git(project, self.limits)
        top = git.toplevel()
        if top is None:
            return f"{project} is not a git repository"
        if top != project.resolve():
            return f"{project} is not a git repository root (its root is {top})"
        if git.head_sha() is None:
            return f"{project} has no commit yet"
        if git.tracked_changes():
            return f"{project} has uncommitted tracked changes (a worktree starts at HEAD without them)"
        in_progress = git.operation_in_progress()
        if in_progress is not None:
            return f"{project} has {in_progress} (an operation in progress)"
        return None

    def create(
        self,
        project: Path,
        worktree_id: str,
        owner_pid: int | None = None,
        *,
        link_node_modules: bool = True,
    ) -> Worktree:
        """Make ``<root>/<id>`` on a new branch ``octipus/<id>`` at the project's HEAD.

        A path that already exists fails and is left as it is, unless it is stale: ``git
        worktree prune`` runs first, and a directory the project's ``git worktree list`` does not
        know, holding no live repository or worktree (no ``.git``, or a ``.git`` file pointing at
        metadata that is gone), is cleared: removed when empty or holding only that ``.git``
        file, otherwise moved whole to ``<root>/.stale/<id>-<time>`` (never deleted with content).
        ``<root>/<id>.pid`` (``owner_pid``, default this process) is written before git runs.
        An existing ``octipus/<id>`` is reset to HEAD only when HEAD already contains it.
        Then the project's ``.worktreeinclude`` files are copied in (``included``) and, when
        ``link_node_modules``, ``node_modules`` is linked (:mod:`.extras`).

        Raises:
            InvalidRequestError: the id is not valid.
            ConflictError: the path is a live worktree or repository, or ``octipus/<id>``
                exists with commits HEAD does not contain.
            WorktreeError: the project is not a repository root ("not a git repository root")
                or has no commit, or git failed; the pid file is removed again.
        """
        check_id(worktree_id)
        path, pid_file = self.root / worktree_id, self.root / f"{worktree_id}.pid"
        if path.exists() or path.is_symlink():
            self._clear_stale(project, path)
        self.root.mkdir(parents=True, exist_ok=True)
        write_owner(pid_file, os.getpid() if owner_pid is None else owner_pid)
        try:
            wt = self._add(project.resolve(), worktree_id, path)
        except BaseException:
            pid_file.unlink(missing_ok=True)
            raise
        included = extras.copy_included(wt.project, wt.path, Git(wt.project, self.limits))
        linked = link_node_modules and extras.link_node_modules(
            wt.project, wt.path, Git(wt.path, self.limits)
        )
        return dataclasses.replace(wt, included=included, node_modules_linked=linked)

    def _add(self, project: Path, worktree_id: str, path: Path) -> Worktree:
        git = Git(project, self.limits)
        if git.toplevel() != project:
            raise WorktreeError(f"{project} is not a git repository root")
        base = git.head_sha()
        if base is None:
            raise WorktreeError(f"{project} has no commit to start a worktree from")
        git.write("worktree", "prune")  # a directory deleted by hand still holds its branch until pruned
        branch = BRANCH_PREFIX + worktree_id
        existing = git.ref_sha(f"refs/heads/{branch}")
        if existing is not None and not git.is_ancestor(existing, base):
            raise ConflictError(
                f"branch {branch} exists with work HEAD does not contain; merge or discard it"
            )
        git.write("worktree", "add", "-B" if existing else "-b", branch, str(path), base)
        wt = Worktree(id=worktree_id, path=path, project=project, branch=branch, base_sha=base)
        self.write_record(wt)
        return wt

    def _clear_stale(self, project: Path, path: Path) -> None:
        """Clear a stale ``path`` (see :meth:`create`) or raise ConflictError, touching nothing."""
        git = Git(project, self.limits)
        git.write("worktree", "prune")
        if path.resolve() in self.registered(git) or path.is_symlink() or not path.is_dir():
            raise ConflictError(f"{path} already exists")
        dot_git = path / ".git"
        if dot_git.is_dir() or (dot_git.is_file() and _linked_gitdir(dot_git) is not None):
            raise ConflictError(f"{path} already exists and holds a live git repository or worktree")
        if {entry.name for entry in path.iterdir()} <= {".git"}:
            shutil.rmtree(path)
            return
        aside = self.root / ".stale" / f"{path.name}-{time.strftime('%Y%m%dT%H%M%S')}"
        aside.parent.mkdir(parents=True, exist_ok=True)
        path.rename(aside)

    @staticmethod
    def registered(git: Git) -> set[Path]:
        """The real paths of the worktrees ``git worktree list`` knows in ``git``'s repository."""
        listing = git.read("worktree", "list", "--porcelain")
        return {
            Path(line[len("worktree ") :]).resolve()
            for line in listing.splitlines()
            if line.startswith("worktree ")
        }

    # ------------------------------------------------------------------ reuse and listing

    def reuse(self, worktree_id: str, owner_pid: int | None = None) -> Worktree | None:
        """The worktree ``id`` made earlier (a crash or contract retry), or None when it is gone.

        It is returned only when its record, its directory and its git registration agree (the
        directory is a worktree top level on ``octipus/<id>``); the pid file then names
        ``owner_pid`` (default this process).

        Raises:
            InvalidRequestError: the id is not valid.
            WorktreeError: git could not run or timed out.
        """
        wt = self._load(check_id(worktree_id))
        if wt is None or not wt.path.is_dir():
            return None
        git = Git(wt.path, self.limits)
        if git.toplevel() != wt.path.resolve() or git.symbolic_head() != f"refs/heads/{wt.branch}":
            return None
        pid = os.getpid() if owner_pid is None else owner_pid
        write_owner(self.root / f"{wt.id}.pid", pid)
        return wt

    def list(self) -> builtins.list[WorktreeInfo]:
        """Every worktree with a record under the root, by id, kept ones included (no git runs)."""
        found: builtins.list[WorktreeInfo] = []
        for record in sorted(self.root.glob("*.json")) if self.root.is_dir() else []:
            try:
                info = self._info(check_id(record.stem))
            except InvalidRequestError:
                continue
            if info is not None:
                found.append(info)
        return found

    def get(self, worktree_id: str) -> WorktreeInfo:
        """The worktree ``id`` as :meth:`list` shows it.

        Raises:
            InvalidRequestError: the id is not valid (the message gives the rule).
            NotFoundError: no record of it under the root.
        """
        info = self._info(check_id(worktree_id))
        if info is None:
            raise NotFoundError(f"no worktree {worktree_id!r} is recorded under {self.root}")
        return info

    def _info(self, worktree_id: str) -> WorktreeInfo | None:
        record = self._read_record(worktree_id)
        wt = self._load(worktree_id, record)
        if wt is None or record is None:
            return None
        kept_ref: str | None = None
        if record.get("kept") is True:  # only an Octipus ref of this id, whatever the file says
            named = record.get("keptRef")
            kept_ref = named if named == wt.branch + DETACHED_SUFFIX else wt.branch
        return WorktreeInfo(
            worktree=wt, owner_pid=self.owner(wt.id), exists=wt.path.is_dir(), kept_ref=kept_ref
        )

    def _record_file(self, worktree_id: str) -> Path:
        return self.root / f"{worktree_id}.json"

    def write_record(self, wt: Worktree, kept_ref: str | None = None) -> None:
        """Write ``<root>/<id>.json`` (atomically): the worktree's record, marked kept with the ref
        holding its work when ``kept_ref`` is given.

        Raises:
            OSError: the root cannot be written.
        """
        record: dict[str, object] = {
            "id": wt.id,
            "project": str(wt.project),
            "branch": wt.branch,
            "baseSha": wt.base_sha,
        }
        if kept_ref is not None:
            record.update(kept=True, keptRef=kept_ref)
        target = self._record_file(wt.id)
        scratch = target.with_name(f"{target.name}.tmp")
        scratch.write_text(json.dumps(record) + "\n", encoding="utf-8")
        os.replace(scratch, target)

    def drop_kept_record(self, worktree_id: str) -> bool:
        """Delete the record of ``id`` only if it is still a kept one (see :meth:`forget`).

        Returns:
            Whether it was deleted.
        """
        record = self._read_record(worktree_id)
        return record is not None and record.get("kept") is True and self.forget(worktree_id)

    def forget(self, worktree_id: str) -> bool:
        """Delete the record and pid file of ``id`` unless a live process owns the id (a worktree
        being made again under the same id writes its pid file first, and keeps its new record).

        Returns:
            Whether they were deleted.
        """
        if owner_alive(self.owner(worktree_id)):
            return False
        (self.root / f"{worktree_id}.pid").unlink(missing_ok=True)
        self._record_file(worktree_id).unlink(missing_ok=True)
        return True

    def _read_record(self, worktree_id: str) -> dict[str, Any] | None:
        try:
            record = json.loads(self._record_file(worktree_id).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def _load(self, worktree_id: str, record: dict[str, Any] | None = None) -> Worktree | None:
        """The record's worktree, or None when there is none or it is not one Octipus wrote (its
        branch must be ``octipus/<id>`` and its base a commit id: both reach git's command line)."""
        record = self._read_record(worktree_id) if record is None else record
        if record is None:
            return None
        branch, base, project = record.get("branch"), record.get("baseSha"), record.get("project")
        if branch != BRANCH_PREFIX + worktree_id or not isinstance(project, str):
            return None
        if not isinstance(base, str) or not SHA_PATTERN.fullmatch(base):
            return None
        return Worktree(
            id=worktree_id, path=self.root / worktree_id, project=Path(project), branch=branch, base_sha=base
        )

    def owner(self, worktree_id: str) -> int | None:
        """The owner's pid in ``<root>/<id>.pid`` (:func:`~.owner.read_owner`), or None: none, unreadable,
        or the pid now names another process than the one that wrote it."""
        return read_owner(self.root / f"{worktree_id}.pid")

    def reap(
        self, now: float | None = None, min_age_seconds: float = MIN_AGE_S, *, dry_run: bool = False
    ) -> builtins.list[ReapReport]:
        """Remove the clean, merged, ownerless worktrees older than ``min_age_seconds``, drop the
        records of kept branches git proves merged or gone, and report the rest
        (:func:`~.reaper.reap`); with ``dry_run``, only say what it would do. Never raises for one
        worktree's git failure."""
        return reap(self, now, min_age_seconds, dry_run=dry_run)

    # ------------------------------------------------------------------ kept branches

    def diff(self, worktree_id: str) -> str:
        """The diff of ``id``'s kept branch against its base (``git diff base...ref``); see
        :func:`~.kept.diff`.

        Raises:
            InvalidRequestError: the id is not valid.
            NotFoundError: no record of it, or its branch is gone.
            WorktreeError: git failed or timed out, or the project is gone.
        """
        return kept.diff(self, self.get(worktree_id))

    def merge_kept(self, worktree_id: str) -> tuple[MergeOutcome, str]:
        """Merge ``id``'s kept branch into the project's current branch; see :func:`~.kept.merge`.

        Raises:
            InvalidRequestError: the id is not valid.
            NotFoundError: no record of it.
            ConflictError: its owner is alive, its project is gone, or its worktree cannot be
                removed safely yet.
            WorktreeError: git failed or timed out.
        """
        with self.holding(check_id(worktree_id)):
            return kept.merge(self, self.get(worktree_id))

    def discard(self, worktree_id: str) -> DiscardOutcome:
        """Delete ``id``'s branch (``git branch -D``: only because a person asked) and its clean
        worktree; see :func:`~.kept.discard`.

        Raises:
            InvalidRequestError: the id is not valid.
            NotFoundError: no record of it.
            ConflictError: its owner is alive, its worktree has uncommitted changes, or git
                refused to delete a ref (what was deleted before is said).
            WorktreeError: git failed or timed out.
        """
        with self.holding(check_id(worktree_id)):
            return kept.discard(self, self.get(worktree_id))

    # ------------------------------------------------------------------ finish, merge, removal

    def merge(self, wt: Worktree) -> tuple[MergeOutcome, str]:
        """Merge ``wt``'s branch into the project when it is safe (see :func:`~.merge.merge_branch`)."""
        return merge_branch(wt, self.limits)

    def finish(self, wt: Worktree, *, merge: bool, reason: MergeOutcome | None = None) -> WorktreeReport:
        """Commit the child's work, report it, merge it when asked, then remove the worktree.

        Steps (FACTS.md §1, "Finish"): a worktree whose HEAD left ``octipus/<id>`` is ``failed``
        and nothing else is done (not committed, not removed). Otherwise uncommitted work is
        committed (``add -A``, ``commit --no-verify``); a head equal to the base is
        ``no_changes``; else the report gets the ``--shortstat`` and the count of changed files,
        and the branch is merged when ``merge`` is true (:meth:`merge`), or the outcome is
        ``reason`` (default ``skipped_status``). Then :meth:`remove`, whose result fills
        ``branchKept`` and ``keptRef``.

        Whatever happens, the owner lets go: ``<root>/<id>.pid`` is gone afterwards, so a worktree
        left in place (removal refused, a HEAD off its branch, a git failure) is ``left``, not
        ``live``: the reaper reports it and a person may merge or discard it while this process
        still runs.

        Raises:
            WorktreeError: git could not run, timed out, or a commit failed; nothing after the
                failing step ran, so the worktree is left for the reaper.
        """
        try:
            return self._finish(wt, merge=merge, reason=reason)
        finally:
            (self.root / f"{wt.id}.pid").unlink(missing_ok=True)

    def _finish(self, wt: Worktree, *, merge: bool, reason: MergeOutcome | None) -> WorktreeReport:
        git = Git(wt.path, self.limits)
        on = git.symbolic_head() if wt.path.is_dir() else None
        if on != f"refs/heads/{wt.branch}":
            head = (git.head_sha() if wt.path.is_dir() else None) or wt.base_sha
            why = f"the worktree's HEAD is no longer on {wt.branch} ({on or 'detached or missing'})"
            return self._report(wt, head, MergeOutcome.FAILED, why, kept=True)
        git.write("add", "-A")
        if not git.run("diff", "--cached", "--quiet").ok:
            git.write("commit", "--no-verify", "-q", "-m", COMMIT_MESSAGE.format(id=wt.id))
        head = git.head_sha() or wt.base_sha
        stat, files = "", 0
        detail: str | None = None
        if head == wt.base_sha:
            outcome = MergeOutcome.NO_CHANGES
        else:
            stat = git.read("diff", "--shortstat", wt.base_sha, head).strip()
            names = git.read("diff", "--name-only", "-z", wt.base_sha, head).split("\0")
            files = sum(1 for name in names if name)
            if merge:
                outcome, detail = self.merge(wt)
            else:
                outcome = reason or MergeOutcome.SKIPPED_STATUS
        removal = self.remove(wt)
        if not removal.removed:
            detail = f"{detail}; {removal.detail}" if detail else removal.detail
        kept = not removal.branch_deleted
        return self._report(
            wt, head, outcome, detail, kept=kept, kept_ref=removal.kept_ref, stat=(stat, files)
        )

    @staticmethod
    def _report(
        wt: Worktree,
        head: str,
        outcome: MergeOutcome,
        detail: str | None,
        *,
        kept: bool,
        kept_ref: str | None = None,
        stat: tuple[str, int] = ("", 0),
    ) -> WorktreeReport:
        return WorktreeReport(
            branch=wt.branch,
            worktree_path=wt.path,
            base_sha=wt.base_sha,
            head_sha=head,
            diff_stat=stat[0],
            files_changed=stat[1],
            merge=outcome,
            merge_detail=detail,
            branch_kept=kept,
            kept_ref=kept_ref if kept_ref is not None else (wt.branch if kept else None),
        )

    def remove(self, wt: Worktree) -> RemoveOutcome:
        """Remove ``wt``'s directory and registration, and its branch when git proves it merged.

        Never with uncommitted changes (untracked files count; ignored ones do not), and never
        when its HEAD would become unreachable: a local branch must already contain it, or
        ``octipus/<id>`` is fast-forwarded onto it (compare-and-set), or ``octipus/<id>-detached``
        is made at it; if none works it stays. ``worktree remove --force`` only after both
        checks. ``octipus/<id>`` is deleted with ``git branch -d`` (never ``-D``) only when the
        project's current branch contains it and it is not the ref keeping the work. A directory
        already gone is pruned. The pid file goes with the directory; the record goes too, unless
        a ref is kept: then it stays, marked kept with that ref (:meth:`list` shows it).

        Raises:
            WorktreeError: git could not run or timed out, or ``worktree remove`` failed.
        """
        project = Git(wt.project, self.limits)
        if wt.path.is_dir():
            here = Git(wt.path, self.limits)
            why = here.uncommitted()
            if why is not None:
                return RemoveOutcome(False, False, wt.branch, f"worktree {wt.path} left in place: {why}")
            head = here.head_sha()
            reachable, kept_ref = keep_reachable(project, wt, head) if head else (False, None)
            if not reachable:
                why = f"its HEAD {head} would become unreachable"
                return RemoveOutcome(False, False, wt.branch, f"worktree {wt.path} left in place: {why}")
            project.write("worktree", "remove", "--force", str(wt.path))
        else:
            kept_ref = None
        project.write("worktree", "prune")
        (self.root / f"{wt.id}.pid").unlink(missing_ok=True)
        deleted = kept_ref != wt.branch and delete_if_merged(project, wt.branch)
        if kept_ref is None and not deleted and project.ref_sha(f"refs/heads/{wt.branch}") is not None:
            kept_ref = wt.branch
        if kept_ref is None:
            self._record_file(wt.id).unlink(missing_ok=True)
        else:
            self.write_record(wt, kept_ref)
        return RemoveOutcome(True, deleted, kept_ref, f"worktree {wt.path} removed")


def _linked_gitdir(dot_git: Path) -> Path | None:
    """The metadata directory a worktree's ``.git`` file points at, when it still exists."""
    try:
        text = dot_git.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:") :].strip())
    target = target if target.is_absolute() else dot_git.parent / target
    return target if target.is_dir() else None
