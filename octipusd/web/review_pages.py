"""The review pages: what waits for a person (``/inbox``), the action journal (``/actions``),
children's worktrees and their diffs (``/worktrees``), usage and cost (``/usage``) and health
(``/health``).

Each renders from the same services and API models the JSON routes use; the decisions (probe,
compensate, contain, review, merge, discard, steer) are taken in the browser through the JSON API
(``static/review.js``), never by a page route. ``/inbox`` updates live: ``review.js`` follows
``GET /v1/activity`` and re-fetches ``/fragments/inbox`` (the same template block) when a run
reports something.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from octipus_worktrees import check_id

from octipusd.api.action_routes import explain_action
from octipusd.api.app import health_out
from octipusd.api.common import Services, live_action_ids, out
from octipusd.api.models import ApprovalOut, RunOut, UsageTotalsOut
from octipusd.api.usage_routes import By, usage_report
from octipusd.api.worktree_routes import survey, survey_one
from octipusd.errors import NotFoundError, OctipusError
from octipusd.store.aio import in_thread
from octipusd.store.journal_store import ActionReceipt, ToolAction
from octipusd.web.diff_view import parse_diff
from octipusd.web.pages import PageRoute, render

__all__ = ["review_router"]

#: Most pending approvals and unresolved actions the inbox and the journal page list (records).
INBOX_LIMIT: Final = 200
#: Most review batches (recovery review approvals) the journal page lists (records).
REVIEW_BATCHES: Final = 50
#: Most rows each table of the usage page lists (groups).
USAGE_ROWS: Final = 100

#: The usage page's tables, in order.
_USAGE_TABLES: Final[tuple[By, ...]] = ("session", "model_row", "run")

#: Approval kinds that are recovery or replay reviews (shown with the journal, not as tool prompts).
_REVIEW_KINDS: Final = ("action_recovery", "pipeline_replay")

#: What each decision on an uncertain action does, in plain words (shown beside its button).
DECISIONS: Final = {
    "probe": (
        "Probe: run the tool's own verification check once to find out whether the effect happened. "
        "Nothing is changed; a clear answer settles the action."
    ),
    "compensate": (
        "Compensate: run the tool's declared correction to offset the effect (for example delete what "
        "was created). Use it when the effect happened and should be undone."
    ),
    "contain": (
        "Contain: record that you dealt with the effect yourself (say how); the note is kept in the "
        "receipt and the action stops blocking."
    ),
    "review": (
        "Acknowledge (review the session's batch): allow the session to make changes again without "
        "settling what happened; deny keeps the actions blocking."
    ),
}


@dataclass(frozen=True, slots=True)
class ActionView:
    """An unresolved action on the page: its record, receipt and explanation."""

    action: ToolAction
    receipts: list[ActionReceipt]
    explanation: str


def _blocking(services: Services, actions: list[ToolAction]) -> list[ToolAction]:
    """The actions that wait for recovery review (a call still running here waits for nothing)."""
    live = live_action_ids(services)
    return [a for a in actions if not (a.outcome == "started" and a.id in live)]


async def _inbox(services: Services) -> dict[str, Any]:
    """What the inbox block shows: pending prompts, pending reviews and uncertain actions."""
    store = services.store
    pending = [
        out(ApprovalOut, a)
        for a in await in_thread(store.list_approvals, status="pending", limit=INBOX_LIMIT)
    ]
    unresolved = await in_thread(store.list_actions, unresolved=True, limit=INBOX_LIMIT)
    return {
        "prompts": [a for a in pending if a.kind not in _REVIEW_KINDS],
        "reviews": [a for a in pending if a.kind in _REVIEW_KINDS],
        "uncertain": _blocking(services, unresolved),
    }


async def _action_views(services: Services) -> list[ActionView]:
    """The unresolved actions with their receipts and explanations (oldest first)."""
    store = services.store
    live = live_action_ids(services)
    views = []
    actions = await in_thread(store.list_actions, unresolved=True, limit=INBOX_LIMIT)
    now = store.now()
    for action in _blocking(services, actions):
        receipts = await in_thread(store.list_receipts, action.id)
        text = explain_action(action, live=action.id in live, receipts=receipts, now=now)
        views.append(ActionView(action, receipts, text))
    return views


def review_router(services: Services) -> APIRouter:
    """The review pages over ``services`` (left out of the OpenAPI schema: they are not the API)."""
    router = APIRouter(include_in_schema=False, route_class=PageRoute)
    store = services.store

    @router.get("/inbox", response_class=HTMLResponse)
    async def inbox(request: Request) -> HTMLResponse:
        return render(request, "review/inbox.html", **await _inbox(services))

    @router.get("/fragments/inbox", response_class=HTMLResponse)
    async def inbox_fragment(request: Request) -> HTMLResponse:
        return render(request, "review/_inbox.html", **await _inbox(services))

    @router.get("/actions", response_class=HTMLResponse)
    async def actions(request: Request) -> HTMLResponse:
        reviews = await in_thread(store.list_approvals, kinds=_REVIEW_KINDS, limit=REVIEW_BATCHES)
        batches = [out(ApprovalOut, a) for a in reviews]
        views = await _action_views(services)
        sessions = sorted({v.action.session_id for v in views if v.action.session_id})
        return render(
            request,
            "review/actions.html",
            views=views,
            sessions=sessions,
            batches=batches,
            decisions=DECISIONS,
            available=services.actions is not None,
        )

    @router.get("/worktrees", response_class=HTMLResponse)
    async def worktrees(request: Request) -> HTMLResponse:
        found = await in_thread(survey, services.runs.services.worktrees)
        return render(request, "review/worktrees.html", worktrees=found)

    @router.get("/worktrees/{worktree_id}", response_class=HTMLResponse)
    async def worktree(request: Request, worktree_id: str) -> HTMLResponse:
        check_id(worktree_id)
        try:
            wt = await in_thread(survey_one, services.runs.services.worktrees, worktree_id)
        except NotFoundError:
            raise NotFoundError(f"worktree {worktree_id} not found; see the list at /worktrees") from None
        child = await in_thread(store.child_of_worktree, worktree_id)
        diff_error = None
        try:
            files, notes = parse_diff(await in_thread(services.runs.services.worktrees.diff, worktree_id))
        except OctipusError as exc:  # its branch is gone: the page still shows the record
            files, notes, diff_error = [], [], services.private.hide(exc.message)
        return render(
            request,
            "review/worktree.html",
            wt=wt,
            child=out(RunOut, child) if child is not None else None,
            files=files,
            notes=notes,
            diff_error=diff_error,
        )

    @router.get("/usage", response_class=HTMLResponse)
    async def usage(request: Request) -> HTMLResponse:
        reports = {by: await usage_report(services, by, USAGE_ROWS) for by in _USAGE_TABLES}
        total = out(UsageTotalsOut, await in_thread(store.usage_total))
        return render(request, "review/usage.html", reports=reports, total=total)

    @router.get("/health", response_class=HTMLResponse)
    async def health(request: Request) -> HTMLResponse:
        return render(request, "review/health.html", health=await health_out(services))

    return router
