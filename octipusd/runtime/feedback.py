"""Plan feedback in the runtime: a person's word on the work plan, on its way to the agent and back.

Seed 003 "Plans, feedback and delegation", FACTS.md §8. A person adds feedback on the session's plan
or on one of its steps (:func:`add_plan_feedback`) and may answer the agent's question on an item
(:func:`reply_plan_feedback`, which reopens it); both are stored first, then announced as a
``plan_feedback`` event on the session's live root run (no live run: the log line is all). The agent
reads the complete history in ``get_cli_run_context`` (:func:`feedback_for_agent`: pending and
``needs_clarification`` items in full, handled ones as ``{id, status}`` only) and answers items in
``update_work_plan`` with the plan's current revision
(:meth:`~octipusd.runtime.host.RunHost.save_work_plan`). :func:`unhandled_plan_feedback` counts what
the agent still owes the person, for the follow-up decision at the end of a run.
"""

from __future__ import annotations

from typing import Any

from octipusd.policy.spaces import check_space_comment
from octipusd.runtime.events import FEEDBACK_EVENT
from octipusd.runtime.services import RunRegistry, RunServices
from octipusd.store.aio import in_thread
from octipusd.store.records import PlanFeedback, WorkPlan
from octipusd.store.repository import Store
from octipusd.toolkit import FeedbackStatus

__all__ = [
    "add_plan_feedback",
    "feedback_for_agent",
    "plan_for_agent",
    "reply_plan_feedback",
    "unhandled_plan_feedback",
]


def plan_for_agent(plan: WorkPlan | None) -> dict[str, Any] | None:
    """The plan as an agent reads it: its document with its ``revision`` (None: no plan)."""
    return None if plan is None else {**plan.plan, "revision": plan.revision}


def feedback_for_agent(item: PlanFeedback) -> dict[str, Any]:
    """One item of the run context's feedback history.

    An applied item is ``{id, status}`` only (FACTS.md §8 "Run context"); a pending or
    ``needs_clarification`` one carries what the agent needs to act: ``text``, ``stepId`` (when on a
    step), ``author``, ``planRevision`` (the revision it was given at), the agent's last ``response``
    and the person's ``replies``.
    """
    if item.status is FeedbackStatus.APPLIED:
        return {"id": item.id, "status": item.status.value}
    shown: dict[str, Any] = {"id": item.id, "status": item.status.value, "text": item.text}
    if item.step_id is not None:
        shown["stepId"] = item.step_id
    shown.update(author=item.author, planRevision=item.plan_revision)
    if item.response is not None:
        shown["response"] = item.response
    if item.replies:
        shown["replies"] = [{"text": r.text, "author": r.author} for r in item.replies]
    return shown


def event_data(action: str, item: PlanFeedback) -> dict[str, Any]:
    """The data of a ``plan_feedback`` event: what happened (``added``, ``replied``, ``answered``)
    and the item as it stands."""
    return {
        "action": action,
        "feedback_id": item.id,
        "status": item.status.value,
        "step_id": item.step_id,
        "author": item.author,
        "plan_revision": item.plan_revision,
        "text": item.replies[-1].text if action == "replied" and item.replies else item.text,
        "response": item.response,
    }


async def announce(services: RunServices, registry: RunRegistry, action: str, item: PlanFeedback) -> None:
    """Emit the ``plan_feedback`` event on the session's live root run (logged either way; never raises)."""
    live = registry.of_session(item.session_id, roots_only=True)
    await services.hub.emit_optional(
        live.run.id if live is not None else None, FEEDBACK_EVENT, event_data(action, item)
    )


async def _check_author(services: RunServices, session_id: str, author: str) -> None:
    """In a space, the author must be a member who may comment (404 / 403 / 409 otherwise)."""
    session = await in_thread(services.store.get_session, session_id)
    if session.space_id is not None:
        check_space_comment(await in_thread(services.store.get_space, session.space_id), author)


async def add_plan_feedback(
    services: RunServices,
    registry: RunRegistry,
    session_id: str,
    text: str,
    *,
    author: str,
    step_id: str | None = None,
) -> PlanFeedback:
    """Store a person's feedback on the session's plan (or one step of it), then announce it.

    Raises:
        NotFoundError: no such session, or (in a space) the author is not a member.
        ForbiddenError: in a space, the author is a viewer.
        ConflictError: the session has no plan yet, or its plan holds the most feedback it may, or
            its space is archived.
        InvalidRequestError: empty or too long ``text``; ``step_id`` names no step of the plan.
    """
    await _check_author(services, session_id, author)
    item = await in_thread(services.store.add_plan_feedback, session_id, text, author=author, step_id=step_id)
    await announce(services, registry, "added", item)
    return item


async def reply_plan_feedback(
    services: RunServices,
    registry: RunRegistry,
    session_id: str,
    feedback_id: str,
    text: str,
    *,
    author: str,
) -> PlanFeedback:
    """Store a person's reply on a feedback item (reopening it: ``pending``), then announce it.

    Raises:
        NotFoundError: no such session, no feedback ``feedback_id`` on its plan, or (in a space) the
            author is not a member.
        ForbiddenError: in a space, the author is a viewer.
        ConflictError: the item holds the most replies it may, or the session's space is archived.
        InvalidRequestError: empty or too long ``text``.
    """
    await _check_author(services, session_id, author)
    item = await in_thread(services.store.reply_plan_feedback, session_id, feedback_id, text, author=author)
    await announce(services, registry, "replied", item)
    return item


async def unhandled_plan_feedback(store: Store, session_id: str) -> int:
    """How many feedback items on the session's (root) plan the agent has not handled: ``pending``
    ones (new, or reopened by a reply). ``needs_clarification`` waits for the person and does not
    count; nor does ``applied``. 0 for a session without plan or feedback.

    Raises:
        StoreError: the database failed.
    """
    return await in_thread(store.count_unhandled_feedback, session_id)
