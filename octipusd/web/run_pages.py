"""The run page (``/runs/{id}``: transcript, cost, children, stop and steer, the approval prompts the
run waits on), the approval page (``/approvals/{id}``) and their live fragments.

The transcript grows in the browser: ``app.js`` fetches ``/fragments/runs/{id}/events?after=N``
(the entries after ``seq`` N, rendered by the same macro as the full page; the response's
``X-Last-Seq`` header is the last ``seq`` it covered and ``X-More: 1`` says another page follows)
whenever the activity feed says the run has new events.
"""

from __future__ import annotations

from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from octipusd import questionnaire
from octipusd.api.common import Services, out
from octipusd.api.limits import After
from octipusd.api.models import ApprovalOut, EventOut, RunOut
from octipusd.store.aio import in_thread
from octipusd.store.records import ApprovalStatus, RunStatus
from octipusd.web.pages import PageRoute, render
from octipusd.web.present import TranscriptEntry, entry_for

__all__ = ["questions_of", "run_pages_router"]

#: Events one transcript page (the full page, or one fragment) covers at most; the browser fetches
#: the next page at once.
TRANSCRIPT_PAGE_EVENTS: Final = 1000


def questions_of(approval: ApprovalOut) -> list[dict[str, Any]]:
    """The questions of a questionnaire approval (:func:`octipusd.questionnaire.questions_of`)."""
    return questionnaire.questions_of({"questions": approval.questions, "input": approval.input})


async def _transcript(services: Services, run_id: str, after: int) -> tuple[list[TranscriptEntry], int, bool]:
    """The entries after ``after`` (one page), the last ``seq`` covered, and whether more follow."""
    events = await in_thread(
        services.store.list_events, run_id, after_seq=after, limit=TRANSCRIPT_PAGE_EVENTS
    )
    shown = [entry for e in events if (entry := entry_for(out(EventOut, e))) is not None]
    last = events[-1].seq if events else after
    return shown, last, len(events) == TRANSCRIPT_PAGE_EVENTS


async def _run_context(services: Services, run_id: str) -> dict[str, Any]:
    """The run (404: unknown), its children and the approvals it waits on.

    Raises:
        NotFoundError: no such run.
    """
    store = services.store
    run = out(RunOut, await in_thread(store.get_run, run_id))
    children = [out(RunOut, c) for c in await in_thread(store.list_children, run_id)]
    pending = await in_thread(store.list_approvals, status=ApprovalStatus.PENDING, run_id=run_id)
    approvals = [out(ApprovalOut, a) for a in pending]
    return {
        "run": run,
        "children": children,
        "approvals": approvals,
        "questions_of": questions_of,
        **_controls(run),
    }


def _controls(run: RunOut) -> dict[str, Any]:
    """The run page's controls: Steer while the run is live, nothing to steer once it ended."""
    return {"session_id": run.session_id, "live": not RunStatus(run.status).terminal, "next_turn": False}


def run_pages_router(services: Services) -> APIRouter:
    """The run and approval pages over ``services`` (not in the OpenAPI schema)."""
    router = APIRouter(include_in_schema=False, route_class=PageRoute)

    @router.get("/runs/{run_id}", response_class=HTMLResponse)
    async def run_page(request: Request, run_id: str) -> HTMLResponse:
        context = await _run_context(services, run_id)
        entries, last, more = await _transcript(services, run_id, 0)
        return render(request, "run.html", entries=entries, last_seq=last, more=more, **context)

    @router.get("/fragments/runs/{run_id}/events", response_class=HTMLResponse)
    async def run_events(request: Request, run_id: str, after: After = 0) -> HTMLResponse:
        await in_thread(services.store.get_run, run_id)  # 404 for an unknown run
        entries, last, more = await _transcript(services, run_id, after)
        response = render(request, "fragments/events.html", entries=entries)
        response.headers["X-Last-Seq"] = str(last)
        response.headers["X-More"] = "1" if more else "0"
        return response

    @router.get("/fragments/runs/{run_id}/summary", response_class=HTMLResponse)
    async def run_summary(request: Request, run_id: str) -> HTMLResponse:
        return render(request, "fragments/run_summary.html", **await _run_context(services, run_id))

    @router.get("/fragments/runs/{run_id}/approvals", response_class=HTMLResponse)
    async def run_approvals(request: Request, run_id: str) -> HTMLResponse:
        return render(request, "fragments/approvals.html", **await _run_context(services, run_id))

    @router.get("/fragments/runs/{run_id}/controls", response_class=HTMLResponse)
    async def run_controls(request: Request, run_id: str) -> HTMLResponse:
        run = out(RunOut, await in_thread(services.store.get_run, run_id))
        return render(request, "fragments/controls.html", **_controls(run))

    @router.get("/approvals/{approval_id}", response_class=HTMLResponse)
    async def approval_page(request: Request, approval_id: str) -> HTMLResponse:
        approval = out(ApprovalOut, await in_thread(services.store.get_approval, approval_id))
        return render(request, "approval.html", approval=approval, questions_of=questions_of)

    return router
