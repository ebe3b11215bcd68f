"""Store methods for work plans and their feedback history (mixed into :class:`Store`).

Seed 003 "Plans, feedback and delegation", FACTS.md §8. A session has at most one work plan; its
``revision`` counts the saves (1: the first). An agent's update names the revision it read and is
refused when the plan moved on since (a stale revision is a conflict). A person adds feedback on the
plan or on one of its steps; each item records the revision it was given at. The agent answers items
in its plan update (``applied`` or ``needs_clarification``, with a note), in the same transaction
that saves the plan; a person's reply reopens an item (``pending``). Nothing of the history is ever
dropped while the session lives. Same conventions as ``repository.py``: one committed transaction per
method, frozen records out; the session row is locked first by every write, so plan saves and
feedback of one session are serialized.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError
from octipusd.store.codec import StoreMixin, dump_object, load_object, new_id
from octipusd.store.models import PlanFeedbackRow, SessionRow, WorkPlanRow
from octipusd.store.records import FeedbackReply, PlanFeedback, WorkPlan
from octipusd.toolkit.plans import FeedbackResponse, FeedbackStatus

__all__ = [
    "MAX_FEEDBACK_CHARS",
    "MAX_FEEDBACK_ENTRIES",
    "MAX_FEEDBACK_REPLIES",
    "PlanStoreMixin",
]

#: Feedback entries one session's plan holds at most (FACTS.md §8 "Limits").
MAX_FEEDBACK_ENTRIES = 50
#: Characters of one feedback text, reply or agent note at most.
MAX_FEEDBACK_CHARS = 4000
#: Replies one feedback item holds at most.
MAX_FEEDBACK_REPLIES = 20


def _work_plan(row: WorkPlanRow) -> WorkPlan:
    return WorkPlan(
        session_id=row.session_id,
        plan=load_object(row.plan),
        updated_at=row.updated_at,
        revision=row.revision,
    )


def _reply(raw: Any) -> FeedbackReply:
    return FeedbackReply(
        text=str(raw["text"]),
        author=str(raw["author"]),
        created_at=datetime.fromisoformat(str(raw["createdAt"])),
        answering=raw.get("answering"),
    )


def _feedback(row: PlanFeedbackRow) -> PlanFeedback:
    replies = json.loads(row.replies)
    return PlanFeedback(
        id=row.id,
        session_id=row.session_id,
        seq=row.seq,
        text=row.text,
        step_id=row.step_id,
        author=row.author,
        plan_revision=row.plan_revision,
        status=FeedbackStatus(row.status),
        response=row.response,
        responded_at=row.responded_at,
        responded_revision=row.responded_revision,
        replies=tuple(_reply(r) for r in replies) if isinstance(replies, list) else (),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _text(value: str, field: str) -> str:
    """A person's or agent's text, stripped; refused empty or over :data:`MAX_FEEDBACK_CHARS`."""
    stripped = value.strip()
    if not stripped:
        raise InvalidRequestError(f"{field}: must not be empty")
    if len(stripped) > MAX_FEEDBACK_CHARS:
        raise InvalidRequestError(f"{field}: longer than {MAX_FEEDBACK_CHARS} characters ({len(stripped)})")
    return stripped


def _step_ids(plan: WorkPlanRow) -> list[str]:
    steps = load_object(plan.plan).get("steps")
    return (
        [str(s["id"]) for s in steps if isinstance(s, dict) and "id" in s] if isinstance(steps, list) else []
    )


class PlanStoreMixin(StoreMixin):
    """Work plans and their feedback; see the module docstring."""

    def get_work_plan(self, session_id: str) -> WorkPlan | None:
        """Return the session's work plan, or None when it has none.

        Raises:
            StoreError: The database failed.
        """
        with self._tx(f"reading the work plan of session {session_id}") as db:
            row = db.get(WorkPlanRow, session_id)
            return _work_plan(row) if row is not None else None

    def read_plan(self, session_id: str) -> tuple[WorkPlan | None, list[PlanFeedback]]:
        """The session's work plan (None: none yet) and its complete feedback history, oldest first,
        from one snapshot.

        Raises:
            NotFoundError: No such session.
            StoreError: The database failed.
        """
        with self._tx(f"reading the work plan and feedback of session {session_id}") as db:
            if db.get(SessionRow, session_id) is None:
                raise NotFoundError(f"session {session_id} not found")
            row = db.get(WorkPlanRow, session_id)
            items = self._feedback_rows(db, session_id)
            return (_work_plan(row) if row is not None else None), [_feedback(i) for i in items]

    def save_work_plan(
        self,
        session_id: str,
        plan: dict[str, Any],
        *,
        revision: int | None = None,
        responses: Sequence[FeedbackResponse] = (),
    ) -> WorkPlan:
        """Insert or replace the session's work plan, and record the agent's feedback answers with it.

        Args:
            session_id: The session.
            plan: The plan document (JSON object).
            revision: The revision the caller read (0: it saw no plan); the save is refused unless it
                is the current one. None replaces whatever is stored (no agent update does that).
            responses: The agent's answers to feedback items of the session, applied in the same
                transaction (each sets the item's status and note).

        Returns:
            The stored plan, its revision one more than before.

        Raises:
            ConflictError: ``revision`` is not the plan's current revision (the message names it).
            InvalidRequestError: ``plan`` is not a JSON-serialisable dict; a response names no feedback
                item of the session, sets ``pending``, or its note is empty or too long (the message
                names ``feedbackResponses[i]``).
            NotFoundError: No such session.
            StoreError: The database failed.
        """
        payload = dump_object(plan, "work plan")
        with self._tx(f"saving the work plan of session {session_id}", write=True) as db:
            self._lock_session(db, session_id)
            row = db.get(WorkPlanRow, session_id)
            current = row.revision if row is not None else 0
            if revision is not None and revision != current:
                raise ConflictError(_stale(revision, current))
            now = self._clock()
            if row is None:
                row = WorkPlanRow(session_id=session_id, plan=payload, updated_at=now, revision=1)
            else:
                row.plan = payload
                row.updated_at = now
                row.revision = current + 1
            db.add(row)
            self._answer_feedback(db, session_id, responses, row.revision, now)
        return _work_plan(row)

    def _answer_feedback(
        self,
        db: DbSession,
        session_id: str,
        responses: Sequence[FeedbackResponse],
        revision: int,
        now: datetime,
    ) -> None:
        for index, answer in enumerate(responses):
            where = f"feedbackResponses[{index}]"
            item = db.get(PlanFeedbackRow, answer.id)
            if item is None or item.session_id != session_id:
                raise InvalidRequestError(f"{where}.id: no feedback {answer.id!r} on this session's plan")
            if answer.status is FeedbackStatus.PENDING:
                raise InvalidRequestError(f"{where}.status: must be applied or needs_clarification")
            item.status = answer.status.value
            item.response = (
                _text(answer.response, f"{where}.response") if answer.response is not None else None
            )
            item.responded_at = now
            item.responded_revision = revision
            item.updated_at = now
            db.add(item)

    def add_plan_feedback(
        self, session_id: str, text: str, *, author: str, step_id: str | None = None
    ) -> PlanFeedback:
        """Record a person's feedback on the session's plan (or on one step of it), ``pending``.

        Args:
            session_id: The session.
            text: The feedback (stripped; not empty, at most :data:`MAX_FEEDBACK_CHARS`).
            author: Who gives it.
            step_id: A step of the current plan it is about; None for the whole plan.

        Raises:
            ConflictError: The session has no work plan yet, or its plan holds
                :data:`MAX_FEEDBACK_ENTRIES` feedback entries already.
            InvalidRequestError: ``text`` is empty or too long, or the plan has no step ``step_id``.
            NotFoundError: No such session.
            StoreError: The database failed.
        """
        text = _text(text, "text")
        with self._tx(f"adding feedback to the work plan of session {session_id}", write=True) as db:
            self._lock_session(db, session_id)
            plan = db.get(WorkPlanRow, session_id)
            if plan is None:
                raise ConflictError(
                    f"session {session_id} has no work plan yet: feedback is given on the plan its agent "
                    "made (update_work_plan); send guidance instead (octipusctl steer, or the next turn)"
                )
            if step_id is not None and step_id not in (steps := _step_ids(plan)):
                known = ", ".join(repr(s) for s in steps) or "none"
                raise InvalidRequestError(
                    f"step_id: the plan (revision {plan.revision}) has no step {step_id!r} (its steps: {known})"
                )
            count = db.exec(
                select(func.count())
                .select_from(PlanFeedbackRow)
                .where(col(PlanFeedbackRow.session_id) == session_id)
            ).one()
            if count >= MAX_FEEDBACK_ENTRIES:
                raise ConflictError(
                    f"the plan of session {session_id} holds {count} feedback entries, the limit "
                    f"({MAX_FEEDBACK_ENTRIES}); answer or reply to existing ones"
                )
            seq = db.exec(
                select(func.max(PlanFeedbackRow.seq)).where(col(PlanFeedbackRow.session_id) == session_id)
            ).one()
            now = self._clock()
            row = PlanFeedbackRow(
                id=new_id(),
                session_id=session_id,
                seq=(seq or 0) + 1,
                text=text,
                step_id=step_id,
                author=author,
                plan_revision=plan.revision,
                status=FeedbackStatus.PENDING.value,
                created_at=now,
                updated_at=now,
            )
            db.add(row)
        return _feedback(row)

    def reply_plan_feedback(
        self, session_id: str, feedback_id: str, text: str, *, author: str
    ) -> PlanFeedback:
        """Record a person's reply to the agent's note on a feedback item; the item is ``pending`` again.

        Raises:
            ConflictError: The item holds :data:`MAX_FEEDBACK_REPLIES` replies already.
            InvalidRequestError: ``text`` is empty or too long.
            NotFoundError: No such session, or no feedback ``feedback_id`` on its plan.
            StoreError: The database failed.
        """
        text = _text(text, "text")
        with self._tx(f"replying to feedback {feedback_id} of session {session_id}", write=True) as db:
            self._lock_session(db, session_id)
            row = db.get(PlanFeedbackRow, feedback_id)
            if row is None or row.session_id != session_id:
                raise NotFoundError(
                    f"feedback_id: no feedback {feedback_id!r} on the plan of session {session_id}"
                )
            replies = json.loads(row.replies)
            if len(replies) >= MAX_FEEDBACK_REPLIES:
                raise ConflictError(
                    f"feedback {feedback_id} holds {len(replies)} replies, the limit ({MAX_FEEDBACK_REPLIES}); "
                    "add new feedback instead"
                )
            now = self._clock()
            replies.append(
                {"text": text, "author": author, "createdAt": now.isoformat(), "answering": row.response}
            )
            row.replies = json.dumps(replies, separators=(",", ":"))
            row.status = FeedbackStatus.PENDING.value
            row.updated_at = now
            db.add(row)
        return _feedback(row)

    def count_unhandled_feedback(self, session_id: str) -> int:
        """How many feedback items of the session's plan are ``pending`` (``needs_clarification``
        waits for the person and does not count).

        Raises:
            StoreError: The database failed.
        """
        with self._tx(f"counting the unhandled feedback of session {session_id}") as db:
            return int(
                db.exec(
                    select(func.count())
                    .select_from(PlanFeedbackRow)
                    .where(
                        col(PlanFeedbackRow.session_id) == session_id,
                        col(PlanFeedbackRow.status) == FeedbackStatus.PENDING.value,
                    )
                ).one()
            )

    @staticmethod
    def _feedback_rows(db: DbSession, session_id: str) -> Sequence[PlanFeedbackRow]:
        return db.exec(
            select(PlanFeedbackRow)
            .where(col(PlanFeedbackRow.session_id) == session_id)
            .order_by(col(PlanFeedbackRow.seq))
        ).all()


def _stale(given: int, current: int) -> str:
    if current == 0:
        return (
            f"revision: the session has no work plan yet, so its revision is 0, not {given}; send revision 0"
        )
    hint = "read the plan again (get_work_plan or get_cli_run_context) and send your update with"
    if given == 0:
        return f"revision: required: the plan's current revision is {current}; {hint} revision {current}"
    return f"revision: stale: you sent {given}, the plan's current revision is {current}; {hint} revision {current}"
