"""API routes of a session's work plan and its feedback (seed 003 "Plans, feedback and delegation").

Routes (under ``/v1``)::

    GET  /sessions/{id}/plan                                the plan, its revision and its feedback history
    POST /sessions/{id}/plan/feedback                       feedback on the plan or one step (201)
    POST /sessions/{id}/plan/feedback/{feedback_id}/reply   answer the agent's note; reopens the item

The agent answers feedback through ``update_work_plan``; people add and reply here. Errors: an
unknown session or feedback id is a 404 naming it; a plan-less session a 409; empty text, or a
``step_id`` the plan does not have, a 400 naming the field (a missing or over-long field: 422).
"""

from __future__ import annotations

from fastapi import APIRouter

from octipusd.api.common import Services, out
from octipusd.api.models import API_VERSION, FeedbackCreate, FeedbackOut, FeedbackReplyCreate, PlanOut
from octipusd.runtime.feedback import add_plan_feedback, reply_plan_feedback
from octipusd.store.aio import in_thread
from octipusd.store.records import PlanFeedback, WorkPlan

__all__ = ["plan_out", "plan_router"]


def plan_out(session_id: str, plan: WorkPlan | None, feedback: list[PlanFeedback]) -> PlanOut:
    """The API model of a session's plan and feedback history (as :meth:`Store.read_plan` gives them)."""
    return PlanOut(
        session_id=session_id,
        plan=plan.plan if plan is not None else None,
        revision=plan.revision if plan is not None else 0,
        updated_at=plan.updated_at if plan is not None else None,
        feedback=[out(FeedbackOut, item) for item in feedback],
    )


def plan_router(services: Services) -> APIRouter:
    """Routes of work plans and their feedback over ``services``."""
    router = APIRouter(prefix=f"/{API_VERSION}")
    store, runs = services.store, services.runs

    @router.get("/sessions/{session_id}/plan")
    async def get_plan(session_id: str) -> PlanOut:
        return plan_out(session_id, *await in_thread(store.read_plan, session_id))

    @router.post("/sessions/{session_id}/plan/feedback", status_code=201)
    async def add_feedback(session_id: str, body: FeedbackCreate) -> FeedbackOut:
        item = await add_plan_feedback(
            runs.services,
            runs.registry,
            session_id,
            body.text,
            author=body.author or services.user,
            step_id=body.step_id,
        )
        return out(FeedbackOut, item)

    @router.post("/sessions/{session_id}/plan/feedback/{feedback_id}/reply")
    async def reply_feedback(session_id: str, feedback_id: str, body: FeedbackReplyCreate) -> FeedbackOut:
        item = await reply_plan_feedback(
            runs.services,
            runs.registry,
            session_id,
            feedback_id,
            body.text,
            author=body.author or services.user,
        )
        return out(FeedbackOut, item)

    return router
