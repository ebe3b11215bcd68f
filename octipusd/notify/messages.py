"""What is worth a notification, and what it says (issue 16, item 3).

A run needs a person when it raises an approval or a questionnaire (``approval_requested``), when a
call needs a recovery review it cannot get (``review_required``), and when a root run ends: a
``failed`` run always notifies, any other ending only when the run took longer than
``notify.finishedAfterSeconds`` (with its cost when the vendor reported one, shown as every client
shows it); a child agent's run never notifies its ending (its parent hears it).

:func:`wanted` picks those events out of a committed batch (cheap, no I/O: it runs on the event
path); :func:`compose` turns one into a :class:`Notification` from the event and the rows it names
(run, session, approval), read by the notifier's worker. A notification says what the person must
judge (the session, the run, the tool and its subject, the questions) and links to the page; it
never carries a tool's whole input (file contents), a token or a capability, nor a control
character (an escape sequence an agent wrote shows as ``\x1b[...``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from octipusd.inert import inert
from octipusd.money import format_usd
from octipusd.questionnaire import questions_of
from octipusd.store.pipeline_records import Pipeline, PipelineStatus
from octipusd.store.records import Approval, Run, RunEvent, RunStatus, Session
from octipusd.store.schedule_records import Schedule, ScheduleFiring

__all__ = [
    "PIPELINE_KIND",
    "SCHEDULE_KIND",
    "MessageLimits",
    "Notification",
    "PageUrl",
    "compose",
    "compose_pipeline",
    "compose_pipeline_approval",
    "compose_schedule_failure",
    "wanted",
]

#: The kind of a pipeline's end notification.
PIPELINE_KIND: Final = "pipeline_status"
#: The kind of a schedule firing's notification (one that could not start).
SCHEDULE_KIND: Final = "schedule_firing"

#: Builds the page's link for a path (``/runs/ID``, ``/approvals/ID``): the web listener's base URL
#: and the path, without any token; None when the page is off (then a notification has no link).
PageUrl = Callable[[str], str | None]

#: Event kinds that may notify.
NOTIFYING_KINDS: Final = frozenset({"approval_requested", "review_required", "run_status"})


@dataclass(frozen=True)
class MessageLimits:
    """Bounds of what one notification says.

    Attributes:
        field_chars: Characters of one field (a subject, a reason, a question) at most; longer ones
            are cut with an ellipsis.
        questions: Questions of a questionnaire listed at most (the rest are counted).
        body_chars: Characters of a whole body at most.
    """

    field_chars: int = 500
    questions: int = 4
    body_chars: int = 2000


LIMITS: Final = MessageLimits()


@dataclass(frozen=True)
class Notification:
    """One message for every configured target.

    Attributes:
        title: A short line naming what happened.
        body: What the person needs to judge it, and the link (if any).
        kind: The event kind it came from (``approval_requested``, ``review_required``,
            ``run_status``, or ``test``).
        run_id: The run it is about (None for a test or a pipeline).
        link: The page's URL of the run, approval or pipeline, or None.
        pipeline_id: The pipeline it is about (``pipeline_status``), or None.
    """

    title: str
    body: str
    kind: str
    run_id: str | None = None
    link: str | None = None
    pipeline_id: str | None = None


def wanted(event: RunEvent) -> bool:
    """Whether ``event`` may notify (no I/O; the run's duration is checked later, in :func:`compose`).

    A child's approval event mirrored on its root run (``child_run_id`` set) is skipped: the child's
    own event notifies once.
    """
    if event.kind not in NOTIFYING_KINDS or event.data.get("child_run_id"):
        return False
    if event.kind == "run_status":
        return _terminal(event.data.get("status")) is not None and event.data.get("final") is True
    return True


def _terminal(status: Any) -> RunStatus | None:
    try:
        parsed = RunStatus(status)
    except ValueError:
        return None
    return parsed if parsed.terminal else None


def _cut(text: Any, limit: int = LIMITS.field_chars) -> str:
    """``text`` on one line, its control characters visible (:func:`~octipusd.inert.inert`), cut
    at ``limit`` characters: every field of a notification that the agent or a vendor wrote."""
    value = inert(" ".join(str(text).split()))
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _where(session: Session | None) -> str:
    """The session as a person knows it: its title, else its workspace's folder name."""
    if session is None:
        return "a session"
    name = session.title or os.path.basename(session.workspace.rstrip("/")) or session.workspace
    return f"session '{_cut(name, 80)}'"


def _questions(approval: Approval | None) -> list[str]:
    if approval is None:
        return []
    asked = questions_of({"questions": approval.questions, "input": approval.input})
    texts = [_cut(q["question"]) for q in asked if q.get("question")]
    shown = [f"- {t}" for t in texts[: LIMITS.questions]]
    if len(texts) > LIMITS.questions:
        shown.append(f"- and {len(texts) - LIMITS.questions} more")
    return shown


def _approval(
    event: RunEvent, session: Session | None, approval: Approval | None, page: PageUrl
) -> Notification:
    data = event.data
    tool = _cut(data.get("tool_id") or "a tool", 120)
    link = (
        page(f"/approvals/{data['approval_id']}")
        if data.get("approval_id")
        else page(f"/runs/{event.run_id}")
    )
    if data.get("kind") == "questionnaire":
        title = "Octipus: the agent has questions"
        lines = [f"Run {event.run_id} in {_where(session)} asks:", *_questions(approval)]
    else:
        title = f"Octipus: approval needed for {tool}"
        lines = [f"Run {event.run_id} in {_where(session)} asks to use {tool}."]
        if data.get("subject"):
            lines.append(f"Subject: {_cut(data['subject'])}")
        why = data.get("explanation") or data.get("reason")
        if why:
            lines.append(f"Why it asks: {_cut(why)}")
    return _message(title, lines, event, link)


def _body(lines: list[str], link: str | None) -> str:
    """The lines and the link (if any), cut to :attr:`MessageLimits.body_chars`."""
    body = "\n".join([*lines, f"Open: {link}"] if link is not None else lines)
    return body[: LIMITS.body_chars - 1] + "…" if len(body) > LIMITS.body_chars else body


def _message(title: str, lines: list[str], event: RunEvent, link: str | None) -> Notification:
    return Notification(title=title, body=_body(lines, link), kind=event.kind, run_id=event.run_id, link=link)


def _duration(run: Run | None) -> float | None:
    if run is None or run.started_at is None or run.ended_at is None:
        return None
    return (run.ended_at - run.started_at).total_seconds()


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def compose(
    event: RunEvent,
    *,
    run: Run | None,
    session: Session | None,
    approval: Approval | None,
    page: PageUrl,
    finished_after_s: float,
) -> Notification | None:
    """The notification of a :func:`wanted` event, or None when it does not notify after all (a run
    that ended other than ``failed`` within ``finished_after_s`` seconds, or whose times are unknown;
    a child agent's run, whatever its ending).

    Args:
        event: The event.
        run: Its run's row (None if it could not be read: the message says less).
        session: The run's session (None likewise).
        approval: The approval an ``approval_requested`` event names (its questions), or None.
        page: Builds the page's link for a path.
        finished_after_s: ``notify.finishedAfterSeconds``.
    """
    data = event.data
    run_link = page(f"/runs/{event.run_id}")
    if event.kind == "approval_requested":
        return _approval(event, session, approval, page)
    if event.kind == "review_required":
        tool = _cut(data.get("tool_id") or "a tool", 120)
        lines = [f"Run {event.run_id} in {_where(session)} needs a review of {tool}."]
        if data.get("reason"):
            lines.append(_cut(data["reason"]))
        return _message(f"Octipus: review required for {tool}", lines, event, run_link)
    status = _terminal(data.get("status"))
    took = _duration(run)
    if run is not None and run.parent_run_id is not None:
        return None  # a child's ending is its parent's business (a failed child is reported to it)
    if status is None or (status is not RunStatus.FAILED and (took is None or took <= finished_after_s)):
        return None
    lines = [
        f"Run {event.run_id} in {_where(session)} {status}" + (f" after {_minutes(took)}." if took else ".")
    ]
    if data.get("reason"):
        lines.append(f"Reason: {_cut(data['reason'])}")
    if run is not None and run.cost_usd is not None:
        lines.append(f"Cost: {format_usd(run.cost_usd)}")
    return _message(f"Octipus: run {status}", lines, event, run_link)


#: The pipeline statuses that end a walk and notify (``paused`` and ``awaiting_approval`` wait for a
#: person through their own paths; ``stopped`` is a person's or an agent's own doing, but notifies
#: like a run's ending when it took long).
_PIPELINE_ENDINGS: Final = frozenset(
    {PipelineStatus.COMPLETED, PipelineStatus.FAILED, PipelineStatus.STOPPED}
)


def compose_pipeline(pipeline: Pipeline, *, page: PageUrl, finished_after_s: float) -> Notification | None:
    """The notification of a pipeline's end, as a run's: a ``failed`` pipeline always notifies, a
    ``completed`` or ``stopped`` one only when it ran longer than ``finished_after_s`` seconds (from
    its creation to its end); any other status, or unknown times, none.

    Args:
        pipeline: The pipeline with its final status (the walker's last write).
        page: Builds the page's link for a path.
        finished_after_s: ``notify.finishedAfterSeconds``.
    """
    status = pipeline.status
    took = (pipeline.ended_at - pipeline.created_at).total_seconds() if pipeline.ended_at else None
    if status not in _PIPELINE_ENDINGS:
        return None
    if status is not PipelineStatus.FAILED and (took is None or took <= finished_after_s):
        return None
    where = os.path.basename(pipeline.workspace.rstrip("/")) or pipeline.workspace
    lines = [
        f"Pipeline {pipeline.id} '{_cut(pipeline.name, 80)}' in '{_cut(where, 80)}' {status}"
        + (f" after {_minutes(took)}." if took else ".")
    ]
    if pipeline.error:
        lines.append(f"Reason: {_cut(pipeline.error)}")
    elif pipeline.summary:
        lines.append(_cut(pipeline.summary))
    link = page(f"/pipelines/{pipeline.id}")
    return Notification(
        title=f"Octipus: pipeline {status}",
        body=_body(lines, link),
        kind=PIPELINE_KIND,
        link=link,
        pipeline_id=pipeline.id,
    )


def compose_pipeline_approval(pipeline: Pipeline, approval: Approval, *, page: PageUrl) -> Notification:
    """The notification of an approval a pipeline asks with no run of its own (seed 003: raised as a
    normal permission request, approval prompt and push notification): a stage or plan approval, a
    "continue the stage" question, retries that ran out, a human stage, a replay review. It names
    the pipeline, what is asked and why, with the approval's page (``/approvals/ID``)."""
    where = os.path.basename(pipeline.workspace.rstrip("/")) or pipeline.workspace
    name = _cut(pipeline.name, 80)
    lines = [f"Pipeline {pipeline.id} '{name}' in '{_cut(where, 80)}' waits for your approval."]
    if approval.subject:
        lines.append(f"Subject: {_cut(approval.subject)}")
    if approval.reason:
        lines.append(f"Why it asks: {_cut(approval.reason)}")
    link = page(f"/approvals/{approval.id}")
    return Notification(
        title=f"Octipus: pipeline '{name}' needs your approval",
        body=_body(lines, link),
        kind="approval_requested",
        link=link,
        pipeline_id=pipeline.id,
    )


def compose_schedule_failure(schedule: Schedule, firing: ScheduleFiring, *, page: PageUrl) -> Notification:
    """The notification of a schedule's slot that could not start (or was refused): what the schedule
    does, the slot, the reason and the schedules' page."""
    what = (
        f"prompt '{_cut(schedule.prompt, 80)}'"
        if schedule.prompt
        else f"pipeline '{_cut(schedule.pipeline, 80)}'"
    )
    where = (
        f"session {schedule.session_id}"
        if schedule.session_id
        else f"workspace '{_cut(schedule.workspace, 120)}'"
    )
    lines = [
        f"Schedule {schedule.id} ({schedule.cron}: {what} in {where}) did not start its "
        f"{firing.slot_at.isoformat(timespec='seconds')} slot.",
        f"Reason: {_cut(firing.error)}",
    ]
    link = page("/schedules")
    return Notification(
        title="Octipus: a scheduled run did not start", body=_body(lines, link), kind=SCHEDULE_KIND, link=link
    )
