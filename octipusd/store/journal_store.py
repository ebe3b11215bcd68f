"""Store methods for the action journal (mixed into :class:`Store`).

Tables ``tool_actions`` (seed 000: one row per mutating tool call, no argument or result
bodies) and ``action_receipts`` (seed 004: the append-only receipt of each action); the calls a
person starts by hand (``tool_invocations``) are in :mod:`octipusd.store.invocation_store`. Same conventions as ``repository.py``: one committed transaction per method,
frozen records out, every "exactly once" change a conditional ``UPDATE`` whose row count says
who won.

Outcome writes: :meth:`JournalStoreMixin.start_action` commits ``started`` before the tool
body runs; :meth:`JournalStoreMixin.finish_action` changes only a record still ``started``
(a duplicated completion changes nothing). Both are SQLAlchemy Core statements built once
(:mod:`octipusd.store.journal_sql`; no ORM instance on the path): on PostgreSQL the change and its
receipt entry are one statement, one round trip. A call started by hand binds its action to its
exact claim in the same transaction as ``started``, and its outcome and its request status
commit together (:meth:`InvocationStoreMixin.finish_invocation`). The start-up recovery of
orphaned ``started`` records is in :mod:`octipusd.store.recovery_store`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, delete, func, or_, text, update
from sqlalchemy.engine import Row
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ConflictError, InvalidRequestError, KeyInUseError, NotFoundError
from octipusd.store.codec import StoreMixin, check_limit, new_id
from octipusd.store.journal_sql import (
    ACTIONS,
    INSERT_ACTION,
    INSERT_RECEIPT,
    finish_params,
    finish_statement,
    start_statement,
    write_with_receipt,
)
from octipusd.store.models import ActionReceiptRow, ToolActionRow, ToolInvocationRow
from octipusd.toolkit.contracts import DEFAULT_DEADLINE_SECONDS

__all__ = [
    "ACTION_OUTCOMES",
    "RESOLVED_STATES",
    "ActionReceipt",
    "JournalStoreMixin",
    "ToolAction",
]

log = logging.getLogger("octipusd.store")

#: ``tool_actions.outcome`` values (seed 000).
ACTION_OUTCOMES: tuple[str, ...] = ("started", "completed", "not_executed", "uncertain")
#: Recovery states that settle an uncertain action (seed 004): it no longer blocks mutations.
RESOLVED_STATES: tuple[str, ...] = ("verified", "compensated", "contained")
#: Action ids per ``DELETE ... WHERE id IN (...)`` statement (well under the databases' bound
#: parameter limits).
_DELETE_CHUNK = 500


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


@dataclass(frozen=True, slots=True)
class ToolAction:
    """One journal record (see ``models.ToolActionRow`` for the columns).

    Attributes:
        id: 32 hex characters.
        user: The user the call ran for.
        session_id: The Octipus session (None for none).
        run_id: The run whose bridge made the call (None for a call started by hand).
        agent: The worker (agent) id.
        pipeline_id: Pipeline correlation, when the call ran inside one.
        node_id: Pipeline node correlation.
        origin: ``agent`` or ``manual``.
        invocation_id: The hand-started invocation this action executes, if any.
        tool: ``shell__run`` or ``server.tool``.
        args_hash: SHA-256 (hex) of the canonical JSON arguments.
        risk_class: reversible, compensatable, containable or irreversible.
        idempotency_key: The call's declared key, if any.
        recovery_owner: Who receives it past the deadline (None: ``user``).
        deadline_seconds: Escalation deadline after an uncertain outcome (seconds).
        owner: The daemon instance that ran it.
        outcome: started, completed, not_executed or uncertain.
        detail: One line of evidence.
        recovery_state: Seed 004 state of an uncertain action, else None.
        deadline_at: When an unresolved uncertain action goes to its owner.
        review_id: The recovery review (approval id) that acknowledged it.
        reviewed_by: Who acknowledged it.
        reviewed_at: When.
        started_at: When ``started`` was written.
        finished_at: When the outcome was written.
        in_flight_until: When no dispatched request of the call can land any more (None: no
            bound is known).
        dispatch: Where its request went (a JSON object, see ``DispatchRef``), if recorded.
        dispatch_ended_at: When Octipus positively ended that transport (None: it did not).
        author: Who made the call: the person who started the turn (a space member) or the call
            by hand; None for a record written before the column existed (then ``user``).
    """

    id: str
    user: str
    session_id: str | None
    run_id: str | None
    agent: str | None
    pipeline_id: str | None
    node_id: str | None
    origin: str
    invocation_id: str | None
    tool: str
    args_hash: str
    risk_class: str
    idempotency_key: str | None
    recovery_owner: str | None
    deadline_seconds: float
    owner: str
    outcome: str
    detail: str | None
    recovery_state: str | None
    deadline_at: datetime | None
    review_id: str | None
    reviewed_by: str | None
    reviewed_at: datetime | None
    started_at: datetime
    finished_at: datetime | None
    in_flight_until: datetime | None
    dispatch: dict[str, Any] | None
    dispatch_ended_at: datetime | None
    author: str | None = None

    def may_still_land(self, now: datetime) -> bool:
        """True while a dispatched request of this call may still take effect: its transport was
        not ended by Octipus and its in-flight bound has not passed (or none is known)."""
        if self.dispatch_ended_at is not None:
            return False
        return self.in_flight_until is None or now < self.in_flight_until

    @property
    def resolved(self) -> bool:
        """True when the record does not block mutations: its outcome is known (completed or
        not_executed), a review acknowledged it, or evidence settled it (seed 004)."""
        if self.outcome in ("completed", "not_executed"):
            return True
        return self.review_id is not None or (self.recovery_state in RESOLVED_STATES)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready view (datetimes as ISO 8601 strings)."""
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            out[name] = value.isoformat() if isinstance(value, datetime) else value
        return out


@dataclass(frozen=True, slots=True)
class ActionReceipt:
    """One entry of an action's append-only receipt.

    Attributes:
        id: Increasing integer.
        action_id: The action.
        kind: ``contract``, ``outcome``, ``probe``, ``compensation``, ``escalated``,
            ``reviewed``, ``contained``, ``orphaned``, ``note``.
        state: The recovery state the entry leaves (None when unchanged).
        data: Small JSON evidence.
        created_at: When.
    """

    id: int
    action_id: str
    kind: str
    state: str | None
    data: dict[str, Any]
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready view."""
        return {
            "id": self.id,
            "action_id": self.action_id,
            "kind": self.kind,
            "state": self.state,
            "data": self.data,
            "created_at": self.created_at.isoformat(),
        }


def _action(row: ToolActionRow | Row[Any]) -> ToolAction:
    values = {name: getattr(row, name) for name in ToolAction.__slots__}
    values["dispatch"] = _dispatch(row)
    return ToolAction(**values)


def _dispatch(row: ToolActionRow | Row[Any]) -> dict[str, Any] | None:
    """The stored dispatch object; a value that is not a JSON object reads as none (logged)."""
    if row.dispatch is None:
        return None
    try:
        value = json.loads(row.dispatch)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        log.warning("action %s: its recorded dispatch is not a JSON object; ignored", row.id)
        return None
    return value


#: A new record's columns that ``start_action`` does not set.
_NO_VALUES: dict[str, Any] = {name: None for name in ToolAction.__slots__}


def _receipt(row: ActionReceiptRow) -> ActionReceipt:
    data = json.loads(row.data) if row.data else {}
    return ActionReceipt(
        id=int(row.id or 0),
        action_id=row.action_id,
        kind=row.kind,
        state=row.state,
        data=data if isinstance(data, dict) else {"value": data},
        created_at=row.created_at,
    )


def _check_outcome(outcome: str) -> None:
    if outcome not in ("completed", "not_executed", "uncertain"):
        raise ValueError(f"an outcome is completed, not_executed or uncertain, got {outcome!r}")


def _unresolved() -> Any:
    """SQL condition: an action that blocks mutations unless it is still running here."""
    return (
        col(ToolActionRow.outcome).in_(("uncertain", "started"))
        & col(ToolActionRow.review_id).is_(None)
        & or_(
            col(ToolActionRow.recovery_state).is_(None),
            col(ToolActionRow.recovery_state).not_in(RESOLVED_STATES),
        )
    )


class JournalStoreMixin(StoreMixin):
    """Journal records and their receipts; see the module docstring.

    Mixed into :class:`~octipusd.store.Store`, which provides ``_tx`` and ``_clock``.
    """

    # Actions -----------------------------------------------------------------------------

    def start_action(
        self,
        *,
        user: str,
        session_id: str | None,
        run_id: str | None,
        agent: str | None,
        origin: str,
        tool: str,
        args_hash: str,
        risk_class: str,
        owner: str,
        deadline_seconds: float,
        idempotency_key: str | None = None,
        recovery_owner: str | None = None,
        pipeline_id: str | None = None,
        node_id: str | None = None,
        contract: dict[str, Any] | None = None,
        invocation: tuple[str, str] | None = None,
        outcome: str = "started",
        detail: str | None = None,
        in_flight_seconds: float | None = None,
        dispatch: dict[str, Any] | None = None,
        author: str | None = None,
    ) -> ToolAction:
        """Write and commit a journal record before the tool body runs.

        Args:
            user, session_id, run_id, agent, pipeline_id, node_id: Ownership and correlation.
            origin: ``agent`` or ``manual``.
            tool: ``shell__run`` or ``server.tool``.
            args_hash: SHA-256 (hex) of the canonical JSON arguments.
            risk_class: The contract's risk class.
            owner: This daemon instance's id.
            deadline_seconds: Escalation deadline after an uncertain outcome (seconds).
            idempotency_key: The call's key, if its contract declares one.
            recovery_owner: The contract's named owner.
            contract: The contract as persisted in the receipt (JSON object).
            invocation: ``(invocation id, claim token)`` for a hand-started call: the record
                is written only while that exact claim still holds, and bound to it in the
                same transaction.
            outcome: ``started`` (the normal case), or ``not_executed`` to record a call
                refused before execution (a policy rejection) in one write.
            detail: Evidence for a ``not_executed`` record.
            in_flight_seconds: The call's own deadline (seconds): until ``started`` plus this,
                a dispatched request may still land (None: no bound is known).
            dispatch: Where the request goes (``DispatchRef.to_json()``), if known now.
            author: Who made the call (a space member who started the turn; None: ``user``).

        Returns:
            The record.

        Raises:
            ValueError: an unknown outcome.
            KeyInUseError: a call of ``tool`` with ``idempotency_key`` by ``user`` is running, or
                an earlier one is being compensated (the tool must not run).
            ConflictError: the invocation's claim was lost (the tool must not run).
            StoreError: the database failed (the tool must not run).
        """
        if outcome not in ("started", "not_executed"):
            raise ValueError(f"a new action starts as 'started' or 'not_executed', got {outcome!r}")
        encoded = _json(dispatch) if dispatch is not None else None
        values: dict[str, Any] = dict(
            _NO_VALUES,
            id=new_id(),
            user=user,
            session_id=session_id,
            run_id=run_id,
            agent=agent,
            pipeline_id=pipeline_id,
            node_id=node_id,
            origin=origin,
            invocation_id=invocation[0] if invocation else None,
            tool=tool,
            args_hash=args_hash,
            risk_class=risk_class,
            idempotency_key=idempotency_key,
            recovery_owner=recovery_owner,
            deadline_seconds=deadline_seconds,
            owner=owner,
            outcome=outcome,
            detail=detail,
            dispatch=encoded,
            author=author,
        )
        claim = idempotency_key is not None and outcome == "started"
        single = not claim and invocation is None  # PostgreSQL: one statement, one round trip
        with self._core(f"recording {tool} in the action journal", write=True, single=single) as conn:
            if claim:
                self._claim_key(conn, user, tool, str(idempotency_key))
            now = self._clock()  # after any wait for the write lock: the bound starts here
            values["started_at"] = now
            values["finished_at"] = now if outcome != "started" else None
            if in_flight_seconds is not None:
                values["in_flight_until"] = now + timedelta(seconds=in_flight_seconds)
            receipt = {
                "action_id": values["id"],
                "kind": "contract" if outcome == "started" else "outcome",
                "state": None,
                "data": _json(dict(contract or {}, outcome=outcome, detail=detail)),
                "created_at": now,
            }
            if invocation is not None:
                conn.execute(INSERT_ACTION, values)  # before the invocation refers to it
                self._bind_invocation(conn, invocation, values["id"], now)
                conn.execute(INSERT_RECEIPT, receipt)
            else:
                write_with_receipt(conn, self._sqlite, start_statement(self._sqlite), values, receipt)
        values["dispatch"] = json.loads(encoded) if encoded is not None else None
        return ToolAction(**values)

    @staticmethod
    def _bind_invocation(
        conn: Connection, invocation: tuple[str, str], action_id: str, now: datetime
    ) -> None:
        """Inside ``started``'s transaction: bind the action to the invocation's exact claim.

        Raises:
            ConflictError: the claim was lost (the transaction must roll back).
        """
        bound = conn.execute(
            update(ToolInvocationRow)
            .where(
                col(ToolInvocationRow.id) == invocation[0],
                col(ToolInvocationRow.claim_token) == invocation[1],
                col(ToolInvocationRow.status) == "executing",
                col(ToolInvocationRow.action_id).is_(None),
            )
            .values(action_id=action_id, updated_at=now)
        )
        if not bound.rowcount:
            raise ConflictError(
                f"invocation {invocation[0]} is no longer claimed by this executor; it was not run"
            )

    def _lock_key(self, conn: Connection, user: str, tool: str, key: str) -> None:
        """Serialise the writers of one user's tool and idempotency key until the transaction ends
        (a PostgreSQL advisory transaction lock; SQLite writes are serial already)."""
        if self._sqlite:
            return
        digest = hashlib.sha256(f"{user}\0{tool}\0{key}".encode()).digest()
        conn.execute(
            text("SELECT pg_advisory_xact_lock(:k)"), {"k": int.from_bytes(digest[:8], "big", signed=True)}
        )

    def _claim_key(self, conn: Connection, user: str, tool: str, key: str) -> None:
        """Inside a write transaction: refuse a new call while another call with the same user,
        tool and idempotency key is ``started`` or being compensated."""
        self._lock_key(conn, user, tool, key)
        busy = conn.execute(
            sa.select(ACTIONS.c.id, ACTIONS.c.outcome)
            .where(
                ACTIONS.c.user == user,
                ACTIONS.c.tool == tool,
                ACTIONS.c.idempotency_key == key,
                or_(ACTIONS.c.outcome == "started", ACTIONS.c.recovery_state == "recovering"),
            )
            .limit(1)
        ).first()
        if busy is not None:
            what = "is running" if busy[1] == "started" else "is being compensated"
            raise KeyInUseError(
                f"{tool} was not run: an earlier call with idempotency key {key!r} (action {busy[0]}) {what}; "
                "retry once its outcome is known"
            )

    def finish_action(
        self,
        action_id: str,
        *,
        outcome: str,
        detail: str | None,
        data: dict[str, Any] | None = None,
        answered: bool = False,
    ) -> bool:
        """Record the outcome of a ``started`` action, exactly once.

        Args:
            action_id: The record.
            outcome: ``completed``, ``not_executed`` or ``uncertain``.
            detail: One line of evidence (no result bodies).
            data: Extra receipt evidence (small JSON object).
            answered: The call is over (it answered, or Octipus stopped it): no request of it
                can land any more, so ``dispatch_ended_at`` is set too.

        Returns:
            True if this call wrote the outcome; False if the record had already left
            ``started`` (a duplicated completion changes nothing).

        Raises:
            ValueError: an unknown outcome.
            StoreError: the database failed (the record stays ``started``, which blocks later
                mutations pending review).
        """
        _check_outcome(outcome)
        # ``uncertain`` reads the record first (its deadline, a remedy meanwhile): two statements
        with self._core(
            f"recording the outcome of action {action_id}", write=True, single=outcome != "uncertain"
        ) as conn:
            return self._finish_action(
                conn, action_id, outcome=outcome, detail=detail, data=data, answered=answered
            )

    def _finish_action(
        self,
        conn: Connection,
        action_id: str,
        *,
        outcome: str,
        detail: str | None,
        data: dict[str, Any] | None,
        answered: bool = False,
    ) -> bool:
        _check_outcome(outcome)
        now = self._clock()
        values: dict[str, Any] = {"outcome": outcome, "detail": detail, "finished_at": now}
        if answered:
            values["dispatch_ended_at"] = now
        state = None
        if outcome == "uncertain":
            row = conn.execute(
                sa.select(ACTIONS.c.recovery_state, ACTIONS.c.deadline_seconds).where(
                    ACTIONS.c.id == action_id
                )
            ).first()
            if row is None or row.recovery_state is None:  # a person's remedy meanwhile is kept
                state = "effect_unconfirmed"
                seconds = row.deadline_seconds if row is not None else DEFAULT_DEADLINE_SECONDS
                values["recovery_state"] = state
                values["deadline_at"] = now + timedelta(seconds=seconds)
        change = finish_statement(self._sqlite, tuple(values))
        receipt = {
            "action_id": action_id,
            "kind": "outcome",
            "state": state,
            "data": _json(dict(data or {}, outcome=outcome, detail=detail)),
            "created_at": now,
        }
        return write_with_receipt(conn, self._sqlite, change, finish_params(action_id, values), receipt)

    def get_action(self, action_id: str) -> ToolAction:
        """Return one journal record.

        Raises:
            NotFoundError: no such action.
        """
        with self._tx(f"reading action {action_id}") as db:
            row = db.get(ToolActionRow, action_id)
            if row is None:
                raise NotFoundError(f"action {action_id} not found; `octipusctl actions list` shows them")
            return _action(row)

    def list_actions(
        self,
        *,
        user: str | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
        pipeline_id: str | None = None,
        outcome: str | None = None,
        unresolved: bool = False,
        ids: Collection[str] | None = None,
        tool: str | None = None,
        idempotency_key: str | None = None,
        limit: int = 200,
    ) -> list[ToolAction]:
        """Return journal records, oldest first, filtered.

        Args:
            user, session_id, run_id, pipeline_id, outcome, tool, idempotency_key: Equality
                filters.
            unresolved: Only records that block mutations (uncertain or ``started`` ones not
                acknowledged or settled; a ``started`` record still running here is included:
                callers exclude their live ones).
            ids: Only these records.
            limit: At most this many (>= 1).

        Raises:
            InvalidRequestError: ``limit`` < 1 or an unknown outcome.
        """
        check_limit(limit)
        if outcome is not None and outcome not in ACTION_OUTCOMES:
            raise InvalidRequestError(f"outcome must be one of {', '.join(ACTION_OUTCOMES)}, got {outcome!r}")
        query = select(ToolActionRow)
        for column, value in (
            (ToolActionRow.user, user),
            (ToolActionRow.session_id, session_id),
            (ToolActionRow.run_id, run_id),
            (ToolActionRow.pipeline_id, pipeline_id),
            (ToolActionRow.outcome, outcome),
            (ToolActionRow.tool, tool),
            (ToolActionRow.idempotency_key, idempotency_key),
        ):
            if value is not None:
                query = query.where(col(column) == value)
        if unresolved:
            query = query.where(_unresolved())
        if ids is not None:
            query = query.where(col(ToolActionRow.id).in_(list(ids)))
        query = query.order_by(col(ToolActionRow.started_at), col(ToolActionRow.id)).limit(limit)
        with self._tx("listing actions") as db:
            return [_action(r) for r in db.exec(query).all()]

    def uncertain_with_key(self, *, user: str, tool: str, key: str, limit: int) -> list[ToolAction]:
        """The user's ``uncertain`` and ``started`` calls of ``tool`` with idempotency key ``key``,
        in every session, oldest first (at most ``limit``): what a retry with that key is judged
        against."""
        query = (
            select(ToolActionRow)
            .where(
                col(ToolActionRow.user) == user,
                col(ToolActionRow.outcome).in_(("uncertain", "started")),
                col(ToolActionRow.tool) == tool,
                col(ToolActionRow.idempotency_key) == key,
            )
            .order_by(col(ToolActionRow.started_at), col(ToolActionRow.id))
            .limit(limit)
        )
        with self._tx("reading earlier calls with an idempotency key") as db:
            return [_action(r) for r in db.exec(query).all()]

    @staticmethod
    def _later_than(action: ToolAction) -> list[Any]:
        """Conditions: a call of the same user, tool and key as ``action``, other than it, started
        no earlier (a tie counts as later, both ways), not proven unexecuted."""
        return [
            col(ToolActionRow.user) == action.user,
            col(ToolActionRow.tool) == action.tool,
            col(ToolActionRow.idempotency_key) == action.idempotency_key,
            col(ToolActionRow.outcome) != "not_executed",
            col(ToolActionRow.id) != action.id,
            col(ToolActionRow.started_at) >= action.started_at,
        ]

    def later_call_with_key(self, action: ToolAction) -> bool:
        """True when a call of the same user, tool and idempotency key as ``action`` started no
        earlier than it (a tie counts) and was not proven unexecuted: its effect is
        indistinguishable to a probe."""
        if action.idempotency_key is None:
            return False
        query = select(ToolActionRow.id).where(*self._later_than(action)).limit(1)
        with self._tx("reading later calls with an idempotency key") as db:
            return db.exec(query).first() is not None

    def blocking_actions(
        self, *, user: str, session_id: str | None, live: Collection[str] = (), limit: int = 20
    ) -> list[ToolAction]:
        """The records that require a recovery review before the next mutation (seed 000).

        Uncertain records, and ``started`` records not in ``live`` (orphans: their call is not
        running in this process), of this user and session, neither acknowledged by a review
        nor settled by evidence; oldest first.

        Args:
            user: The user.
            session_id: The session (None: records without a session).
            live: Ids of actions running in this process now.
            limit: Batch size (the seed's reviews cover at most 20 records).
        """
        query = select(ToolActionRow).where(col(ToolActionRow.user) == user, _unresolved())
        if session_id is None:
            query = query.where(col(ToolActionRow.session_id).is_(None))
        else:
            query = query.where(col(ToolActionRow.session_id) == session_id)
        if live:
            query = query.where(
                or_(col(ToolActionRow.outcome) != "started", col(ToolActionRow.id).not_in(list(live)))
            )
        query = query.order_by(col(ToolActionRow.started_at), col(ToolActionRow.id)).limit(limit)
        with self._tx("reading unresolved actions") as db:
            return [_action(r) for r in db.exec(query).all()]

    def expire_runless_approvals(self, now: datetime) -> list[str]:
        """Mark pending approvals that belong to no run and are past ``expires_at`` expired.

        Nobody waits on such an approval (a call started by hand, a recovery review of one), so
        the recovery worker expires them; their invocations become ``expired`` in the same
        transaction.

        Returns:
            The ids expired.
        """
        from octipusd.store.models import ApprovalRow

        with self._tx("expiring approvals of no run", write=True) as db:
            ids = list(
                db.exec(
                    select(ApprovalRow.id).where(
                        col(ApprovalRow.run_id).is_(None),
                        col(ApprovalRow.status) == "pending",
                        col(ApprovalRow.expires_at) <= now,
                    )
                ).all()
            )
            expired: list[str] = []
            for approval_id in ids:
                result = db.exec(
                    update(ApprovalRow)
                    .where(col(ApprovalRow.id) == approval_id, col(ApprovalRow.status) == "pending")
                    .values(
                        status="expired",
                        decided_by="octipusd",
                        decision_reason="expired before it was answered",
                        decided_at=now,
                    )
                    .execution_options(synchronize_session=False)
                )
                if result.rowcount:
                    self._follow_approval(db, approval_id, "expired", "expired before it was answered")
                    expired.append(approval_id)
            return expired

    def next_runless_approval_expiry(self) -> datetime | None:
        """The earliest ``expires_at`` of a pending approval of no run (None: none)."""
        from octipusd.store.models import ApprovalRow

        with self._tx("reading the next approval expiry") as db:
            value = db.exec(
                select(func.min(ApprovalRow.expires_at)).where(
                    col(ApprovalRow.run_id).is_(None), col(ApprovalRow.status) == "pending"
                )
            ).first()
            return value if isinstance(value, datetime) else None

    def _acknowledge_actions(
        self, db: DbSession, review_id: str, action_ids: Iterable[str], by: str, now: datetime
    ) -> None:
        """Inside a review's decision: mark the covered records acknowledged (outcome unchanged)."""
        ids = list(action_ids)
        if not ids:
            return
        result = db.exec(
            select(ToolActionRow.id).where(
                col(ToolActionRow.id).in_(ids), col(ToolActionRow.review_id).is_(None)
            )
        ).all()
        db.exec(
            update(ToolActionRow)
            .where(col(ToolActionRow.id).in_(list(result)))
            .values(review_id=review_id, reviewed_by=by, reviewed_at=now)
            .execution_options(synchronize_session=False)
        )
        for action_id in result:
            db.add(
                ActionReceiptRow(
                    action_id=action_id,
                    kind="reviewed",
                    state=None,
                    data=_json({"review_id": review_id, "by": by}),
                    created_at=now,
                )
            )

    def _note_refused_review(
        self,
        db: DbSession,
        review_id: str,
        action_ids: Iterable[str],
        by: str,
        reason: str | None,
        now: datetime,
    ) -> None:
        """Inside a review's denial: append ``review_denied`` to each covered record's receipt."""
        for action_id in action_ids:
            if db.get(ToolActionRow, action_id) is None:
                continue
            db.add(
                ActionReceiptRow(
                    action_id=action_id,
                    kind="review_denied",
                    state=None,
                    data=_json({"review_id": review_id, "by": by, "reason": reason}),
                    created_at=now,
                )
            )

    def delete_user_journal(self, user: str) -> int:
        """Remove every journal record, receipt and hand-started invocation of ``user``.

        Returns:
            How many journal records were removed.
        """
        with self._tx(f"deleting the journal of user {user}", write=True) as db:
            ids = list(db.exec(select(ToolActionRow.id).where(col(ToolActionRow.user) == user)).all())
            self._delete_actions(db, ids)
            db.exec(delete(ToolInvocationRow).where(col(ToolInvocationRow.user) == user))
            return len(ids)

    @staticmethod
    def _delete_actions(db: DbSession, ids: list[str]) -> None:
        for start in range(0, len(ids), _DELETE_CHUNK):
            chunk = ids[start : start + _DELETE_CHUNK]
            db.exec(delete(ActionReceiptRow).where(col(ActionReceiptRow.action_id).in_(chunk)))
            db.exec(delete(ToolActionRow).where(col(ToolActionRow.id).in_(chunk)))

    # Invocations -------------------------------------------------------------------------
