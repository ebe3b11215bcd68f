"""API routes of child worktrees and child receipts (seed 003 "Optional git worktree per coding
child"; issue 15 items 3 and 6).

Routes (under ``/v1``)::

    GET  /worktrees                  every recorded worktree: state, owner, the reaper's verdict
    GET  /worktrees/{id}/diff        the kept branch's diff against its base (text/plain)
    POST /worktrees/{id}/merge       merge the kept branch into the project's current branch
    POST /worktrees/{id}/discard     delete its branch and clean worktree; body {"confirm": true}
    GET  /runs/{id}/children         a run's child runs, each with its receipt

The worktrees are those of the daemon's :class:`~octipus_worktrees.WorktreeManager` (its root is
``~/.octipus/worktrees`` or ``OCTIPUS_WORKTREES_DIR``); git runs in worker threads. Errors: an id
that is not valid is a 400 giving the rule; an unknown id (or a branch gone) a 404; a live owner,
uncommitted changes or a refused git deletion a 409; a discard without ``confirm: true`` a 400
naming ``confirm``; a git failure or timeout a 500 ``worktree_error`` quoting git.
"""

from __future__ import annotations

import time

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse
from octipus_worktrees import (
    MIN_AGE_S,
    ReapAction,
    WorktreeInfo,
    WorktreeManager,
    check_id,
    owner_alive,
    printable,
    reap_one,
    state_of,
)

from octipusd.api.common import Services, out
from octipusd.api.models import (
    API_VERSION,
    NON_JSON_ERROR_RESPONSES,
    RunOut,
    WorktreeDiscard,
    WorktreeDiscardOut,
    WorktreeMergeOut,
    WorktreeOut,
)
from octipusd.errors import InvalidRequestError
from octipusd.store.aio import in_thread

__all__ = ["survey", "survey_one", "worktree_router"]


def survey(manager: WorktreeManager, min_age_s: float = MIN_AGE_S) -> list[WorktreeOut]:
    """Every recorded worktree with what the reaper would do with it now (a dry run: nothing is
    removed, deleted or dropped). Blocking (git): run it in a worker thread."""
    now = time.time()
    return [_worktree_out(manager, info, now, min_age_s) for info in manager.list()]


def survey_one(manager: WorktreeManager, worktree_id: str, min_age_s: float = MIN_AGE_S) -> WorktreeOut:
    """One worktree as :func:`survey` shows it (one dry-run reap, not one per worktree). Blocking.

    Raises:
        InvalidRequestError: the id is not valid.
        NotFoundError: no record of it.
    """
    return _worktree_out(manager, manager.get(worktree_id), time.time(), min_age_s)


def _worktree_out(manager: WorktreeManager, info: WorktreeInfo, now: float, min_age_s: float) -> WorktreeOut:
    wt = info.worktree
    report = reap_one(manager, info, now, min_age_s, dry_run=True)
    action, reason = (report.action, report.reason) if report else (ReapAction.KEPT, "not decided")
    return WorktreeOut(
        id=wt.id,
        branch=wt.branch,
        path=printable(str(wt.path)),
        project=printable(str(wt.project)),
        base_sha=wt.base_sha,
        exists=info.exists,
        owner_pid=info.owner_pid,
        owner_alive=owner_alive(info.owner_pid),
        state=state_of(info).value,
        kept_ref=info.kept_ref,
        reaper_action=action.value,
        reaper_reason=printable(reason),
    )


def worktree_router(services: Services) -> APIRouter:
    """Routes of child worktrees and child receipts over ``services``."""
    router = APIRouter(prefix=f"/{API_VERSION}")
    store = services.store

    def manager() -> WorktreeManager:
        return services.runs.services.worktrees

    def min_age_s() -> float:
        return services.reaper.min_age_s if services.reaper is not None else MIN_AGE_S

    @router.get("/worktrees")
    async def list_worktrees() -> list[WorktreeOut]:
        """Every recorded child worktree (kept branches included), by id, with the orphan
        reaper's verdict on it now (decided without changing anything)."""
        return await in_thread(survey, manager(), min_age_s())

    @router.get(
        "/worktrees/{worktree_id}/diff",
        response_class=PlainTextResponse,
        responses={
            **NON_JSON_ERROR_RESPONSES,
            200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
        },
    )
    async def worktree_diff(worktree_id: str) -> PlainTextResponse:
        """``git diff base...ref`` of the ref holding the worktree's work (its kept ref, else its
        branch's committed work); cut past the library's ``diff_chars``, saying so."""
        check_id(worktree_id)
        return PlainTextResponse(await in_thread(manager().diff, worktree_id))

    @router.post("/worktrees/{worktree_id}/merge")
    async def worktree_merge(worktree_id: str) -> WorktreeMergeOut:
        """Merge the kept branch into the project's current branch (the finish's safety checks);
        ``merged`` deletes it with ``git branch -d`` and drops its record."""
        check_id(worktree_id)
        outcome, detail = await in_thread(manager().merge_kept, worktree_id)
        return WorktreeMergeOut(id=worktree_id, outcome=outcome.value, detail=printable(detail))

    @router.post("/worktrees/{worktree_id}/discard")
    async def worktree_discard(worktree_id: str, body: WorktreeDiscard) -> WorktreeDiscardOut:
        """Delete the worktree's branch even unmerged (``git branch -D``) and its clean worktree;
        only with ``confirm: true``."""
        check_id(worktree_id)
        if not body.confirm:
            raise InvalidRequestError(
                f"confirm must be true: discarding worktree {worktree_id} deletes its branch even when "
                'its work is not merged (git branch -D); send {"confirm": true}'
            )
        done = await in_thread(manager().discard, worktree_id)
        return WorktreeDiscardOut(
            id=done.id,
            deleted=done.deleted,
            worktree_removed=done.worktree_removed,
            detail=printable(done.detail),
        )

    @router.get("/runs/{run_id}/children")
    async def run_children(run_id: str) -> list[RunOut]:
        """The child runs ``run_id`` spawned, oldest first (contract retries included), each with
        its receipt (null while it runs)."""
        return [out(RunOut, run) for run in await in_thread(store.list_children, run_id)]

    return router
