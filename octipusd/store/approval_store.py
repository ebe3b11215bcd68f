"""Store methods for approvals (mixed into :class:`Store`; seed 003).

An approval is decided exactly once: one conditional ``UPDATE ... WHERE status = 'pending'``,
so of two concurrent deciders exactly one wins; a decision's consequences (a scoped grant, the
acknowledgement of the journal records a review covers, the hand-started call it gates, the gate
commands a pipeline's stage approval lists: :mod:`octipusd.store.pipeline_decisions`) are
written in the same transaction. Same conventions as ``repository.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import and_, or_, update
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ApprovalError, ConflictError, InvalidRequestError, NotFoundError
from octipusd.store.codec import StoreMixin, check_limit, dump_object, enum_member, iso, load_object, new_id
from octipusd.store.models import ApprovalRow
from octipusd.store.pipeline_decisions import record_approved_gate_commands
from octipusd.store.records import Approval, ApprovalStatus, RunStatus

__all__ = ["APPROVAL_KINDS", "SYSTEM_ACTOR", "ApprovalStoreMixin"]

#: Kinds of approval: a yes/no tool approval, or a questionnaire that needs answers (seed 003).
APPROVAL_KINDS: tuple[str, ...] = ("tool", "questionnaire", "action_recovery", "pipeline_replay")

#: ``decided_by`` written when octipusd itself resolves an approval (expiry, cancel).
SYSTEM_ACTOR = "octipusd"


#: The ``decision`` of an approval in each decided status (a pending one has none).
_DECISIONS: dict[str, Literal["approve", "deny"]] = {
    ApprovalStatus.APPROVED: "approve",
    ApprovalStatus.DENIED: "deny",
    ApprovalStatus.EXPIRED: "deny",
    ApprovalStatus.CANCELLED: "deny",
}


def _approval(row: ApprovalRow) -> Approval:
    return Approval(
        id=row.id,
        run_id=row.run_id,
        session_id=row.session_id,
        tool_id=row.tool_id,
        subject=row.subject,
        reason=row.reason,
        input=load_object(row.input),
        explanation=row.explanation,
        vendor_request_id=row.vendor_request_id,
        status=ApprovalStatus(row.status),
        decided_by=row.decided_by,
        decision_reason=row.decision_reason,
        created_at=row.created_at,
        expires_at=row.expires_at,
        decided_at=row.decided_at,
        kind=row.kind,
        questions=load_object(row.questions) if row.questions else None,
        answers=load_object(row.answers) if row.answers else None,
        grant_id=row.grant_id,
        action_ids=tuple(json.loads(row.action_ids)) if row.action_ids else (),
        decision=_DECISIONS.get(row.status),
    )


class ApprovalStoreMixin(StoreMixin):
    """Approvals (create, read, list, decide, resolve, cancel); see the module docstring."""

    @staticmethod
    def _get_approval_row(db: DbSession, approval_id: str) -> ApprovalRow:
        row = db.get(ApprovalRow, approval_id)
        if row is None:
            raise NotFoundError(f"approval {approval_id} not found")
        return row

    # Approvals ---------------------------------------------------------------------------

    def create_approval(
        self,
        *,
        run_id: str | None,
        session_id: str,
        tool_id: str,
        subject: str | None,
        reason: str | None,
        input: dict[str, Any],
        explanation: str | None,
        vendor_request_id: str | None,
        expires_at: datetime | None,
        kind: str = "tool",
        questions: dict[str, Any] | None = None,
        action_ids: Iterable[str] = (),
        invocation: tuple[str, str] | None = None,
    ) -> Approval:
        """Record a pending approval request for a run (or for a session, without a run).

        Args:
            run_id: The run asking; it must not have ended. None for a request that belongs
                to no run (a call started by hand, a pipeline replay review).
            session_id: The run's session.
            tool_id: Tool identifier, e.g. ``"cli-native:Bash"``.
            subject: The command or path concerned.
            reason: Why approval is needed.
            input: The tool call's input (JSON object).
            explanation: Which permission rule matched.
            vendor_request_id: The vendor's id for the request.
            expires_at: Aware datetime after which it can no longer be approved, or None.
            kind: ``tool``, ``questionnaire``, ``action_recovery`` or ``pipeline_replay``.
            questions: The questionnaire shown to people (JSON object), for ``questionnaire``.
            action_ids: The journal records a recovery or replay review covers.
            invocation: ``(invocation id, decision claim token)``: the undecided hand-started call
                that waits for this approval, linked in the same transaction (seed 001), so a
                daemon that stops in between leaves neither.

        Returns:
            The new approval, status ``pending`` (id: 32 hex characters).

        Raises:
            InvalidRequestError: ``input`` is not a JSON-serialisable dict, or ``kind`` is unknown.
            ValueError: The run belongs to another session (a caller's bug).
            NotFoundError: No such run (or session).
            ConflictError: The run already ended, or the ``invocation``'s claim no longer holds
                (nothing was written).
            StoreError: The database failed.
        """
        payload = dump_object(input, "approval input")
        covered = list(action_ids)
        if kind not in APPROVAL_KINDS:
            raise InvalidRequestError(
                f"approval kind must be one of {', '.join(APPROVAL_KINDS)}, got {kind!r}"
            )
        questions_text = dump_object(questions, "approval questions") if questions is not None else None
        with self._tx(f"creating an approval for run {run_id or '(none)'}", write=True) as db:
            if run_id is None:
                self._lock_session(db, session_id)
            else:
                run = self._lock_run(db, run_id)
                if run.session_id != session_id:
                    raise ValueError(f"run {run_id} belongs to session {run.session_id}, not {session_id}")
                if RunStatus(run.status).terminal:
                    raise ConflictError(
                        f"run {run_id} already ended ({run.status}); it cannot ask for approval"
                    )
            row = ApprovalRow(
                id=new_id(),
                run_id=run_id,
                session_id=session_id,
                tool_id=tool_id,
                subject=subject,
                reason=reason,
                input=payload,
                explanation=explanation,
                vendor_request_id=vendor_request_id,
                status=ApprovalStatus.PENDING.value,
                created_at=self._clock(),
                expires_at=expires_at,
                kind=kind,
                questions=questions_text,
                action_ids=json.dumps(covered) if covered else None,
            )
            db.add(row)
            if invocation is not None:
                self._link_invocation(db, invocation[0], invocation[1], row.id)
        return _approval(row)

    def get_approval(self, approval_id: str) -> Approval:
        """Return the approval ``approval_id``.

        Raises:
            NotFoundError: No such approval.
            StoreError: The database failed.
        """
        with self._tx(f"reading approval {approval_id}") as db:
            return _approval(self._get_approval_row(db, approval_id))

    def list_approvals(
        self,
        *,
        status: ApprovalStatus | str | None = None,
        run_id: str | None = None,
        kinds: Sequence[str] | None = None,
        limit: int = 200,
    ) -> list[Approval]:
        """Return up to ``limit`` approvals, newest first, optionally filtered (``kinds``: only
        approvals of these kinds).

        Raises:
            InvalidRequestError: An unknown status, or ``limit`` < 1.
            StoreError: The database failed.
        """
        check_limit(limit)
        query = select(ApprovalRow)
        if status is not None:
            query = query.where(
                col(ApprovalRow.status) == enum_member(ApprovalStatus, status, "approval status").value
            )
        if run_id is not None:
            query = query.where(col(ApprovalRow.run_id) == run_id)
        if kinds is not None:
            query = query.where(col(ApprovalRow.kind).in_(list(kinds)))
        query = query.order_by(col(ApprovalRow.created_at).desc(), col(ApprovalRow.id).desc()).limit(limit)
        with self._tx("listing approvals") as db:
            return [_approval(r) for r in db.exec(query).all()]

    def decide_approval(
        self,
        approval_id: str,
        *,
        approve: bool,
        decided_by: str,
        reason: str | None = None,
        answers: dict[str, Any] | None = None,
        grant: dict[str, Any] | None = None,
    ) -> Approval:
        """Approve or deny a pending approval, exactly once.

        One conditional ``UPDATE ... WHERE id = ? AND status = 'pending'`` (and not past
        ``expires_at``): of two concurrent deciders exactly one wins. A pending approval
        found past its deadline is marked ``expired`` (committed) and the call fails.

        Args:
            approval_id: The approval.
            approve: True to approve, False to deny.
            decided_by: Who decides (user name).
            reason: Optional reason stored as ``decision_reason``.
            answers: A questionnaire's answers (question text -> answer), stored with it.
            grant: Keyword arguments of :meth:`create_grant` (without ``created_by`` and
                ``approval_id``) for a scoped grant the answer creates ("remember"); written in
                the same transaction, and only when this call wins.

        Returns:
            The decided approval.

        Raises:
            NotFoundError: No such approval.
            ApprovalError: It was already decided, expired or cancelled; the message says
                what, by whom and when.
            StoreError: The database failed.
        """
        status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
        now = self._clock()
        answers_text = dump_object(answers, "approval answers") if answers is not None else None
        grant_row = (
            self._grant_row(**grant, created_by=decided_by, approval_id=approval_id)
            if grant is not None
            else None
        )
        values: dict[str, Any] = {
            "status": status.value,
            "decided_by": decided_by,
            "decision_reason": reason,
            "decided_at": now,
            "answers": answers_text,
        }
        if grant_row is not None:
            values["grant_id"] = grant_row.id
        with (
            self._policy_change(f"deciding approval {approval_id}", needed=grant_row is not None) as change,
            self._tx(f"deciding approval {approval_id}", write=True) as db,
        ):
            result = db.exec(
                update(ApprovalRow)
                .where(
                    col(ApprovalRow.id) == approval_id,
                    col(ApprovalRow.status) == ApprovalStatus.PENDING.value,
                    or_(col(ApprovalRow.expires_at).is_(None), col(ApprovalRow.expires_at) > now),
                )
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            won = bool(result.rowcount)
            if won and grant_row is not None:
                db.add(grant_row)
                change.put_grant(self._grant_record(grant_row))
            if won:
                decided = self._get_approval_row(db, approval_id)
                if decided.kind == "action_recovery" and decided.action_ids:
                    covered = json.loads(decided.action_ids)
                    if approve:
                        self._acknowledge_actions(db, approval_id, covered, decided_by, now)
                    else:  # the refusal joins the evidence; the records stay unresolved
                        self._note_refused_review(db, approval_id, covered, decided_by, reason, now)
                if approve:  # a pipeline's stage approval: its gate commands, with the decision
                    record_approved_gate_commands(db, decided, decided_by, now)
                self._follow_approval(db, approval_id, status.value, reason)
            if not won:
                # Still pending means it is past its deadline: record that it expired.
                db.exec(
                    update(ApprovalRow)
                    .where(
                        col(ApprovalRow.id) == approval_id,
                        col(ApprovalRow.status) == ApprovalStatus.PENDING.value,
                    )
                    .values(
                        status=ApprovalStatus.EXPIRED.value,
                        decided_by=SYSTEM_ACTOR,
                        decision_reason="expired before it was answered",
                        decided_at=now,
                    )
                    .execution_options(synchronize_session=False)
                )
                self._follow_approval(db, approval_id, "expired", "expired before it was answered")
            row = self._get_approval_row(db, approval_id)
        approval = _approval(row)
        if won:
            return approval
        raise ApprovalError(
            f"approval {approval_id} was already {approval.status.value} by "
            f"{approval.decided_by or SYSTEM_ACTOR} at {iso(approval.decided_at)}"
            + (f" ({approval.decision_reason})" if approval.decision_reason else "")
        )

    def resolve_approval_if_pending(
        self,
        approval_id: str,
        *,
        status: ApprovalStatus | str,
        reason: str | None,
        decided_by: str = SYSTEM_ACTOR,
    ) -> bool:
        """Move an approval out of ``pending`` if (and only if) it still is (expiry, cancel).

        Args:
            approval_id: The approval.
            status: Any status but ``pending``; usually ``expired`` or ``cancelled``.
            reason: Stored as ``decision_reason``.
            decided_by: Stored as ``decided_by``; defaults to ``"octipusd"``.

        Returns:
            True if this call changed it, False if it had already left ``pending``.

        Raises:
            ValueError: ``status`` is ``pending`` or unknown.
            NotFoundError: No such approval.
            StoreError: The database failed.
        """
        target = ApprovalStatus(status)
        if target is ApprovalStatus.PENDING:
            raise ValueError("resolve_approval_if_pending needs a status other than 'pending'")
        with self._tx(f"resolving approval {approval_id}", write=True) as db:
            result = db.exec(
                update(ApprovalRow)
                .where(
                    col(ApprovalRow.id) == approval_id,
                    col(ApprovalRow.status) == ApprovalStatus.PENDING.value,
                )
                .values(
                    status=target.value,
                    decided_by=decided_by,
                    decision_reason=reason,
                    decided_at=self._clock(),
                )
                .execution_options(synchronize_session=False)
            )
            if result.rowcount:
                self._follow_approval(db, approval_id, target.value, reason)
                return True
            self._get_approval_row(db, approval_id)
            return False

    def cancel_pending_approvals(
        self,
        run_id: str,
        *,
        status: ApprovalStatus | str = ApprovalStatus.CANCELLED,
        reason: str | None,
    ) -> int:
        """Move every pending approval of a run to ``status`` (default ``cancelled``).

        Args:
            run_id: The run (an unknown run simply has none).
            status: Any status but ``pending``.
            reason: Stored as ``decision_reason``.

        Returns:
            How many approvals changed.

        Raises:
            ValueError: ``status`` is ``pending`` or unknown.
            StoreError: The database failed.
        """
        target = ApprovalStatus(status)
        if target is ApprovalStatus.PENDING:
            raise ValueError("cancel_pending_approvals needs a status other than 'pending'")
        with self._tx(f"cancelling approvals of run {run_id}", write=True) as db:
            return self._resolve_pending_for_runs(db, [run_id], target, reason, self._clock())

    @staticmethod
    def _resolve_pending_for_runs(
        db: DbSession, run_ids: list[str], status: ApprovalStatus, reason: str | None, now: datetime
    ) -> int:
        if not run_ids:
            return 0
        result = db.exec(
            update(ApprovalRow)
            .where(
                and_(
                    col(ApprovalRow.run_id).in_(run_ids),
                    col(ApprovalRow.status) == ApprovalStatus.PENDING.value,
                )
            )
            .values(status=status.value, decided_by=SYSTEM_ACTOR, decision_reason=reason, decided_at=now)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount)
