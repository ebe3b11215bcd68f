"""Store methods for calls a person starts by hand (mixed into :class:`Store`; seed 001).

Table ``tool_invocations``: a call started by hand (``POST /v1/actions/calls``), which may owe an
execution once approved. Same conventions as ``repository.py`` and ``journal_store.py``: one
committed transaction per method, frozen records out, every "exactly once" change a conditional
``UPDATE`` whose row count says who won. An invocation's action is bound to its exact claim when
``started`` is written (:meth:`JournalStoreMixin.start_action`), and its outcome and status commit
together (:meth:`InvocationStoreMixin.finish_invocation`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ConflictError, NotFoundError
from octipusd.store.codec import StoreMixin, new_id
from octipusd.store.journal_store import _json
from octipusd.store.models import ToolInvocationRow

__all__ = ["INVOCATION_RESULT_LIMIT", "INVOCATION_STATUSES", "InvocationStoreMixin", "ToolInvocation"]

#: ``tool_invocations.status`` values. ``awaiting_approval`` -> ``approved`` -> ``executing``
#: (claimed) -> ``completed`` / ``not_executed`` / ``uncertain``; or ``denied``, ``expired``,
#: ``cancelled`` without running.
INVOCATION_STATUSES: tuple[str, ...] = (
    "awaiting_approval",
    "approved",
    "executing",
    "completed",
    "not_executed",
    "uncertain",
    "denied",
    "expired",
    "cancelled",
)
_TERMINAL_INVOCATION = frozenset({"completed", "not_executed", "uncertain", "denied", "expired", "cancelled"})
#: Longest result text kept on an invocation (characters); longer results are cut with a note.
INVOCATION_RESULT_LIMIT = 64 * 1024


@dataclass(frozen=True, slots=True)
class ToolInvocation:
    """A tool call a person started by hand (seed 001's "Test-tab" call).

    Attributes:
        id: 32 hex characters.
        request_id: The client's idempotency key, unique per user (None: none given).
        user: Who started it.
        session_id: The session it runs in (workspace, journal scope).
        tool: The tool id (``shell__run``, ``server.tool``).
        arguments: The arguments while the call is owed (None once it ended).
        args_hash: SHA-256 of the canonical JSON arguments.
        status: See :data:`INVOCATION_STATUSES`.
        approval_id: The approval it waits for or waited for.
        claim_token: The exact claim of the executor dispatching it.
        claimed_at: When the claim was taken.
        claimed_by: The daemon instance holding the claim.
        action_id: Its journal record once ``started`` was written.
        result: The result text (at most 64 KiB) once it ended.
        is_error: The result is an error result.
        error: Why it did not run or what is uncertain.
        created_at: When it was requested.
        updated_at: Last change.
        finished_at: When it reached a terminal status.
    """

    id: str
    request_id: str | None
    user: str
    session_id: str
    tool: str
    arguments: dict[str, Any] | None
    args_hash: str
    status: str
    approval_id: str | None
    claim_token: str | None
    claimed_at: datetime | None
    claimed_by: str | None
    action_id: str | None
    result: str | None
    is_error: bool
    error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None

    @property
    def terminal(self) -> bool:
        """True once the invocation can no longer change."""
        return self.status in _TERMINAL_INVOCATION

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready view without the claim token and the arguments."""
        out: dict[str, Any] = {}
        for name in self.__slots__:
            if name in ("claim_token", "arguments"):
                continue
            value = getattr(self, name)
            out[name] = value.isoformat() if isinstance(value, datetime) else value
        return out


def _invocation(row: ToolInvocationRow) -> ToolInvocation:
    values = {name: getattr(row, name) for name in ToolInvocation.__slots__}
    values["arguments"] = json.loads(row.arguments) if row.arguments is not None else None
    return ToolInvocation(**values)


class InvocationStoreMixin(StoreMixin):
    """Calls started by hand; see the module docstring.

    Mixed into :class:`~octipusd.store.Store`, which provides ``_tx`` and ``_clock``, and (from
    :class:`~octipusd.store.journal_store.JournalStoreMixin`) ``_finish_action``.
    """

    def create_invocation(
        self,
        *,
        user: str,
        session_id: str,
        tool: str,
        arguments: dict[str, Any],
        args_hash: str,
        request_id: str | None,
        status: str,
        claim: tuple[str, str] | None = None,
    ) -> tuple[ToolInvocation, bool]:
        """Record a hand-started call, or return the one already recorded for ``request_id``.

        Args:
            user: Who starts it.
            session_id: Its session.
            tool: Tool id.
            arguments: Its arguments (kept until it ends).
            args_hash: SHA-256 of the canonical JSON arguments.
            request_id: The client's idempotency key (None: every request is new).
            status: ``awaiting_approval`` (undecided yet: see :meth:`settle_invocation`), ``approved``
                or ``denied``.
            claim: ``(token, owner)``: the exact claim of the daemon that decides an undecided
                invocation (its decision is written only while that claim holds; one a stopped
                daemon never decided is found by :meth:`undecided_invocations`).

        Returns:
            ``(invocation, created)``; ``created`` is False when ``request_id`` was seen before
            (a client retry after a lost acknowledgement: nothing new runs).

        Raises:
            ConflictError: ``request_id`` was used before for a different tool or arguments.
            ValueError: an unknown status.
        """
        if status not in INVOCATION_STATUSES:
            raise ValueError(f"unknown invocation status {status!r}")
        now = self._clock()
        row = ToolInvocationRow(
            id=new_id(),
            request_id=request_id,
            user=user,
            session_id=session_id,
            tool=tool,
            arguments=_json(arguments),
            args_hash=args_hash,
            status=status,
            is_error=False,
            created_at=now,
            updated_at=now,
        )
        if claim is not None:
            row.claim_token, row.claimed_by = claim
            row.claimed_at = now
        try:
            with self._tx(f"recording a call of {tool}", write=True) as db:
                db.add(row)
            return _invocation(row), True
        except Exception as exc:
            cause = exc.__cause__
            if request_id is None or not isinstance(cause, IntegrityError):
                raise
        existing = self.find_invocation(user, request_id)
        if existing is None:  # pragma: no cover - the unique key said it exists
            raise ConflictError(f"request {request_id} conflicts with a concurrent request; retry it")
        if existing.tool != tool or existing.args_hash != args_hash:
            raise ConflictError(
                f"request id {request_id!r} was already used for another call ({existing.tool}, "
                f"invocation {existing.id}); use a new request id for a different call"
            )
        return existing, False

    def find_invocation(self, user: str, request_id: str) -> ToolInvocation | None:
        """The invocation ``user`` recorded under ``request_id``, if any."""
        with self._tx("reading an invocation by request id") as db:
            row = db.exec(
                select(ToolInvocationRow).where(
                    col(ToolInvocationRow.user) == user, col(ToolInvocationRow.request_id) == request_id
                )
            ).first()
            return _invocation(row) if row is not None else None

    def get_invocation(self, invocation_id: str) -> ToolInvocation:
        """Return one invocation.

        Raises:
            NotFoundError: no such invocation.
        """
        with self._tx(f"reading invocation {invocation_id}") as db:
            row = db.get(ToolInvocationRow, invocation_id)
            if row is None:
                raise NotFoundError(f"invocation {invocation_id} not found")
            return _invocation(row)

    def list_invocations(
        self, *, user: str | None = None, session_id: str | None = None, limit: int = 100
    ) -> list[ToolInvocation]:
        """Hand-started invocations, newest first."""
        query = select(ToolInvocationRow)
        if user is not None:
            query = query.where(col(ToolInvocationRow.user) == user)
        if session_id is not None:
            query = query.where(col(ToolInvocationRow.session_id) == session_id)
        query = query.order_by(col(ToolInvocationRow.created_at).desc(), col(ToolInvocationRow.id).desc())
        with self._tx("listing invocations") as db:
            return [_invocation(r) for r in db.exec(query.limit(limit)).all()]

    @staticmethod
    def _undecided(invocation_id: str, token: str) -> list[Any]:
        """SQL conditions: ``invocation_id`` is recorded and undecided under the exact claim ``token``."""
        return [
            col(ToolInvocationRow.id) == invocation_id,
            col(ToolInvocationRow.status) == "awaiting_approval",
            col(ToolInvocationRow.approval_id).is_(None),
            col(ToolInvocationRow.claim_token) == token,
        ]

    def settle_invocation(
        self,
        invocation_id: str,
        status: str,
        *,
        token: str,
        reason: str | None = None,
        grant_id: str | None = None,
    ) -> bool:
        """Write the decision of a recorded, undecided invocation under its exact decision claim.

        A hand-started call is recorded ``awaiting_approval`` with no approval before it is
        decided, so a retry of its request finds it and decides nothing (seed 001); its decision
        then sets ``approved`` (owed an execution) or ``denied`` (ended, with ``reason``) here. An ALLOW resting on a grant counts the grant's use in the same
        transaction (``grant_id``): a daemon that stops before the commit leaves neither the use
        nor the decision, so deciding again later spends exactly one use.

        Returns:
            True if written; False if ``grant_id`` no longer applies (used up, expired or revoked
            since the rules were read: decide again); nothing was written then.

        Raises:
            ConflictError: the claim no longer holds (the call was cancelled, or another daemon
                took it over); nothing was written and no use was counted.
        """
        if status not in ("approved", "denied"):
            raise ValueError(f"a decided invocation is approved or denied, got {status!r}")
        now = self._clock()
        values: dict[str, Any] = {
            "status": status,
            "claim_token": None,
            "claimed_at": None,
            "claimed_by": None,
            "updated_at": now,
        }
        if status == "denied":
            values.update(error=reason, is_error=True, arguments=None, finished_at=now)
        with (
            self._policy_change(
                f"deciding invocation {invocation_id}", needed=grant_id is not None
            ) as change,
            self._tx(f"deciding invocation {invocation_id}", write=True) as db,
        ):
            if grant_id is not None and not self._count_grant_use(db, change, grant_id):
                return False
            result = db.exec(
                update(ToolInvocationRow)
                .where(*self._undecided(invocation_id, token))
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            if not result.rowcount:  # raised: the transaction (and a use counted in it) is rolled back
                raise ConflictError(
                    f"invocation {invocation_id} was cancelled or taken over before its decision was recorded"
                )
            return True

    def _link_invocation(self, db: DbSession, invocation_id: str, token: str, approval_id: str) -> None:
        """Inside the transaction creating ``approval_id``: the undecided invocation now waits for it.

        Raises:
            ConflictError: the exact claim ``token`` no longer holds (the approval is rolled back).
        """
        result = db.exec(
            update(ToolInvocationRow)
            .where(*self._undecided(invocation_id, token))
            .values(
                approval_id=approval_id,
                claim_token=None,
                claimed_at=None,
                claimed_by=None,
                updated_at=self._clock(),
            )
            .execution_options(synchronize_session=False)
        )
        if not result.rowcount:
            raise ConflictError(
                f"invocation {invocation_id} was cancelled or taken over before its approval was recorded"
            )

    @staticmethod
    def _left_undecided(owner: str) -> list[Any]:
        """SQL conditions: recorded and undecided, under the claim of a daemon other than ``owner``."""
        return [
            col(ToolInvocationRow.status) == "awaiting_approval",
            col(ToolInvocationRow.approval_id).is_(None),
            or_(col(ToolInvocationRow.claimed_by).is_(None), col(ToolInvocationRow.claimed_by) != owner),
        ]

    def undecided_invocations(self, *, owner: str) -> list[ToolInvocation]:
        """At start-up: the invocations a stopped daemon recorded but never decided (oldest first).

        An undecided invocation carries the claim of the daemon deciding it; one whose claim is
        not ``owner``'s (or that has none: recorded before claims were kept) was left by a daemon
        that stopped (one active daemon per database). It is decided again under the current
        policy: :meth:`claim_undecided`, then :meth:`settle_invocation`.
        """
        with self._tx("finding undecided invocations") as db:
            rows = db.exec(
                select(ToolInvocationRow)
                .where(*self._left_undecided(owner))
                .order_by(col(ToolInvocationRow.created_at), col(ToolInvocationRow.id))
            ).all()
            return [_invocation(r) for r in rows]

    def claim_undecided(self, invocation_id: str, *, token: str, owner: str) -> bool:
        """Take the exact decision claim of an undecided invocation a stopped daemon left (seed 001).

        One conditional ``UPDATE``: of two recoverers exactly one wins, and a call cancelled
        meanwhile is not taken.

        Returns:
            True if this caller now decides it (under ``token``).
        """
        now = self._clock()
        with self._tx(f"claiming the decision of invocation {invocation_id}", write=True) as db:
            result = db.exec(
                update(ToolInvocationRow)
                .where(col(ToolInvocationRow.id) == invocation_id, *self._left_undecided(owner))
                .values(claim_token=token, claimed_at=now, claimed_by=owner, updated_at=now)
                .execution_options(synchronize_session=False)
            )
            return bool(result.rowcount)

    def _follow_approval(self, db: DbSession, approval_id: str, status: str, reason: str | None) -> None:
        """Inside an approval's decision: move its invocation from ``awaiting_approval``."""
        target = {
            "approved": "approved",
            "denied": "denied",
            "expired": "expired",
            "cancelled": "cancelled",
        }.get(status)
        if target is None:
            return
        values: dict[str, Any] = {"status": target, "updated_at": self._clock()}
        if target != "approved":
            values.update(
                finished_at=self._clock(), arguments=None, error=reason or f"the approval was {target}"
            )
        db.exec(
            update(ToolInvocationRow)
            .where(
                col(ToolInvocationRow.approval_id) == approval_id,
                col(ToolInvocationRow.status) == "awaiting_approval",
            )
            .values(**values)
            .execution_options(synchronize_session=False)
        )

    def owed_invocation_users(self) -> list[str]:
        """Users with approved invocations that owe an execution (start-up discovery)."""
        with self._tx("finding owed invocations") as db:
            rows = db.exec(
                select(ToolInvocationRow.user).where(col(ToolInvocationRow.status) == "approved").distinct()
            ).all()
            return sorted(rows)

    def owed_invocations(
        self, user: str, *, after: str | None = None, limit: int = 50
    ) -> list[ToolInvocation]:
        """One page of ``user``'s approved invocations, in id order (scoped read, seed 001)."""
        query = select(ToolInvocationRow).where(
            col(ToolInvocationRow.user) == user, col(ToolInvocationRow.status) == "approved"
        )
        if after is not None:
            query = query.where(col(ToolInvocationRow.id) > after)
        with self._tx(f"reading owed invocations of {user}") as db:
            rows = db.exec(query.order_by(col(ToolInvocationRow.id)).limit(limit)).all()
            return [_invocation(r) for r in rows]

    def claim_invocation(self, invocation_id: str, *, token: str, owner: str) -> bool:
        """Take the exact claim on an approved invocation before dispatch (seed 001).

        One conditional ``UPDATE ... WHERE status = 'approved'``: of two recoverers exactly one
        wins.

        Returns:
            True if this caller holds the claim.
        """
        now = self._clock()
        with self._tx(f"claiming invocation {invocation_id}", write=True) as db:
            result = db.exec(
                update(ToolInvocationRow)
                .where(
                    col(ToolInvocationRow.id) == invocation_id, col(ToolInvocationRow.status) == "approved"
                )
                .values(
                    status="executing", claim_token=token, claimed_at=now, claimed_by=owner, updated_at=now
                )
                .execution_options(synchronize_session=False)
            )
            return bool(result.rowcount)

    def invocation_claimed(self, invocation_id: str, token: str) -> bool:
        """True while ``token`` still holds the claim and nothing was dispatched."""
        with self._tx(f"checking the claim on invocation {invocation_id}") as db:
            row = db.get(ToolInvocationRow, invocation_id)
            return (
                row is not None
                and row.status == "executing"
                and row.claim_token == token
                and row.action_id is None
            )

    def release_invocation_claim(self, invocation_id: str, token: str, *, reason: str) -> bool:
        """Give back a claim after a preparation failure (nothing was dispatched).

        Only the exact claim, and only while no action was started for it: the invocation
        returns to ``approved`` and stays recoverable.

        Returns:
            True if released; False if the claim had changed or the call had started.
        """
        return self._unclaim(invocation_id, token, "releasing the claim on", status="approved", error=reason)

    def requeue_invocation_for_review(self, invocation_id: str, token: str, approval_id: str) -> bool:
        """Hand a claimed, undispatched invocation back to wait for a recovery review.

        Only the exact claim, and only while no action started: the invocation returns to
        ``awaiting_approval`` on ``approval_id`` (its decision makes it ``approved`` again).

        Returns:
            True if requeued.
        """
        return self._unclaim(
            invocation_id, token, "requeueing for review", status="awaiting_approval", approval_id=approval_id
        )

    def _unclaim(self, invocation_id: str, token: str, what: str, **values: Any) -> bool:
        """Drop the exact, undispatched claim ``token`` and set ``values``; True if it held."""
        with self._tx(f"{what} invocation {invocation_id}", write=True) as db:
            result = db.exec(
                update(ToolInvocationRow)
                .where(
                    col(ToolInvocationRow.id) == invocation_id,
                    col(ToolInvocationRow.status) == "executing",
                    col(ToolInvocationRow.claim_token) == token,
                    col(ToolInvocationRow.action_id).is_(None),
                )
                .values(
                    claim_token=None, claimed_at=None, claimed_by=None, updated_at=self._clock(), **values
                )
                .execution_options(synchronize_session=False)
            )
            return bool(result.rowcount)

    def cancel_invocation(self, invocation_id: str, *, by: str) -> ToolInvocation:
        """Withdraw a hand-started call that has not started (awaiting approval or approved).

        Its pending approval, if any, is cancelled in the same transaction.

        Returns:
            The invocation, now ``cancelled``.

        Raises:
            NotFoundError: no such invocation.
            ConflictError: it is running or already ended (the message says which).
        """
        from octipusd.store.models import ApprovalRow

        now = self._clock()
        with self._tx(f"cancelling invocation {invocation_id}", write=True) as db:
            result = db.exec(
                update(ToolInvocationRow)
                .where(
                    col(ToolInvocationRow.id) == invocation_id,
                    col(ToolInvocationRow.status).in_(("awaiting_approval", "approved")),
                )
                .values(
                    status="cancelled",
                    arguments=None,
                    error=f"cancelled by {by} before it ran",
                    finished_at=now,
                    updated_at=now,
                )
                .execution_options(synchronize_session=False)
            )
            db.expire_all()
            row = db.get(ToolInvocationRow, invocation_id)
            if row is None:
                raise NotFoundError(f"invocation {invocation_id} not found")
            if not result.rowcount:
                raise ConflictError(
                    f"invocation {invocation_id} is {row.status}; only a call awaiting approval or approved "
                    "(not yet running) can be cancelled"
                )
            if row.approval_id is not None:
                db.exec(
                    update(ApprovalRow)
                    .where(col(ApprovalRow.id) == row.approval_id, col(ApprovalRow.status) == "pending")
                    .values(
                        status="cancelled",
                        decided_by=by,
                        decision_reason="the call was cancelled",
                        decided_at=now,
                    )
                    .execution_options(synchronize_session=False)
                )
            return _invocation(row)

    def owed_users_of_session(self, session_id: str) -> list[str]:
        """Users with approved invocations in ``session_id`` (scoped signal, seed 001)."""
        with self._tx("finding owed invocations of a session") as db:
            rows = db.exec(
                select(ToolInvocationRow.user)
                .where(
                    col(ToolInvocationRow.session_id) == session_id,
                    col(ToolInvocationRow.status) == "approved",
                )
                .distinct()
            ).all()
            return sorted(rows)

    def finish_invocation(
        self,
        invocation_id: str,
        token: str,
        *,
        status: str,
        result: str | None,
        is_error: bool,
        error: str | None,
        outcome: str | None = None,
        detail: str | None = None,
        answered: bool = False,
    ) -> bool:
        """Commit an invocation's end and its action's outcome together (seed 001).

        Args:
            invocation_id: The invocation.
            token: The claim it was dispatched under; a different current claim (fenced by the
                token) changes nothing.
            status: ``completed``, ``not_executed`` or ``uncertain``.
            result: The result text (cut at 64 KiB).
            is_error: The result is an error result.
            error: Why it did not run or why it is uncertain.
            outcome: The journal outcome of its action (when an action was started).
            detail: Journal evidence.
            answered: The call is over (see :meth:`finish_action`).

        Returns:
            True if written.
        """
        if status not in ("completed", "not_executed", "uncertain"):
            raise ValueError(f"an invocation ends completed, not_executed or uncertain, got {status!r}")
        if result is not None and len(result) > INVOCATION_RESULT_LIMIT:
            result = (
                result[:INVOCATION_RESULT_LIMIT] + f"\n[result cut at {INVOCATION_RESULT_LIMIT} characters]"
            )
        now = self._clock()
        with self._tx(f"recording the end of invocation {invocation_id}", write=True) as db:
            row = db.get(ToolInvocationRow, invocation_id)
            if row is None or row.claim_token != token or row.status != "executing":
                return False
            if row.action_id is not None and outcome is not None:
                self._finish_action(
                    db.connection(),
                    row.action_id,
                    outcome=outcome,
                    detail=detail,
                    data=None,
                    answered=answered,
                )
            db.exec(
                update(ToolInvocationRow)
                .where(
                    col(ToolInvocationRow.id) == invocation_id, col(ToolInvocationRow.claim_token) == token
                )
                .values(
                    status=status,
                    result=result,
                    is_error=is_error,
                    error=error,
                    arguments=None,
                    finished_at=now,
                    updated_at=now,
                )
                .execution_options(synchronize_session=False)
            )
            return True

    def quarantine_invocations(self, *, owner: str) -> list[ToolInvocation]:
        """At start-up: settle invocations claimed by another (stopped) daemon instance.

        A claim without a started action never dispatched (``started`` is written in the
        claim's own transaction before the call), so it goes back to ``approved``; a claim
        whose action started may have run, so the invocation becomes ``uncertain`` and is
        never dispatched again (seed 001: no replay of an uncertain provider call).

        Returns:
            The invocations changed, as they are now.
        """
        now = self._clock()
        with self._tx("settling invocations of a stopped daemon", write=True) as db:
            rows = db.exec(
                select(ToolInvocationRow).where(
                    col(ToolInvocationRow.status) == "executing",
                    or_(
                        col(ToolInvocationRow.claimed_by).is_(None),
                        col(ToolInvocationRow.claimed_by) != owner,
                    ),
                )
            ).all()
            for row in rows:
                if row.action_id is None:
                    row.status = "approved"
                    row.claim_token = None
                    row.claimed_at = None
                    row.claimed_by = None
                else:
                    row.status = "uncertain"
                    row.error = (
                        "the daemon stopped while this call was running; it may have run and is not repeated"
                    )
                    row.arguments = None
                    row.finished_at = now
                row.updated_at = now
                db.add(row)
            db.flush()
            return [_invocation(r) for r in rows]
