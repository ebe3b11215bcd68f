"""Store methods for the action journal (mixed into :class:`Store`).

Tables ``tool_actions`` (seed 000: one row per mutating tool call, no argument or result
bodies), ``action_receipts`` (seed 004: the append-only receipt of each action) and
``tool_invocations`` (seed 001: calls a person started by hand, which may owe an execution
once approved). Same conventions as ``repository.py``: one committed transaction per method,
frozen records out, every "exactly once" change a conditional ``UPDATE`` whose row count says
who won.

Outcome writes: :meth:`JournalStoreMixin.start_action` commits ``started`` before the tool
body runs; :meth:`JournalStoreMixin.finish_action` changes only a record still ``started``
(a duplicated completion changes nothing). A call started by hand binds its action to its
exact claim in the same transaction as ``started``, and its outcome and its request status
commit together (:meth:`JournalStoreMixin.finish_invocation`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Collection, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, or_, text, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ConflictError, KeyInUseError, NotFoundError
from octipusd.store.models import ActionReceiptRow, ToolActionRow, ToolInvocationRow

__all__ = [
    "ACTION_OUTCOMES",
    "INVOCATION_STATUSES",
    "RESOLVED_STATES",
    "ActionReceipt",
    "JournalStoreMixin",
    "ToolAction",
    "ToolInvocation",
]

log = logging.getLogger("octipusd.store")

#: ``tool_actions.outcome`` values (seed 000).
ACTION_OUTCOMES: tuple[str, ...] = ("started", "completed", "not_executed", "uncertain")
#: Recovery states that settle an uncertain action (seed 004): it no longer blocks mutations.
RESOLVED_STATES: tuple[str, ...] = ("verified", "compensated", "contained")
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


def _new_id() -> str:
    return uuid.uuid4().hex


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


def _action(row: ToolActionRow) -> ToolAction:
    values = {name: getattr(row, name) for name in ToolAction.__slots__}
    values["dispatch"] = _dispatch(row)
    return ToolAction(**values)


def _dispatch(row: ToolActionRow) -> dict[str, Any] | None:
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


def _invocation(row: ToolInvocationRow) -> ToolInvocation:
    values = {name: getattr(row, name) for name in ToolInvocation.__slots__}
    values["arguments"] = json.loads(row.arguments) if row.arguments is not None else None
    return ToolInvocation(**values)


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


class JournalStoreMixin:
    """Journal records, receipts and hand-started invocations; see the module docstring.

    Mixed into :class:`~octipusd.store.Store`, which provides ``_tx`` and ``_clock``.
    """

    if TYPE_CHECKING:
        _clock: Callable[[], datetime]
        _sqlite: bool

        def _tx(self, what: str, *, write: bool = False) -> AbstractContextManager[DbSession]: ...

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
        row = ToolActionRow(
            id=_new_id(),
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
            dispatch=_json(dispatch) if dispatch is not None else None,
        )
        with self._tx(f"recording {tool} in the action journal", write=True) as db:
            if idempotency_key is not None and outcome == "started":
                self._claim_key(db, user, tool, idempotency_key)
            now = self._clock()  # after any wait for the write lock: the bound starts here
            row.started_at = now
            row.finished_at = now if outcome != "started" else None
            if in_flight_seconds is not None:
                row.in_flight_until = now + timedelta(seconds=in_flight_seconds)
            db.add(row)
            db.flush()
            if invocation is not None:
                bound = db.exec(
                    update(ToolInvocationRow)
                    .where(
                        col(ToolInvocationRow.id) == invocation[0],
                        col(ToolInvocationRow.claim_token) == invocation[1],
                        col(ToolInvocationRow.status) == "executing",
                        col(ToolInvocationRow.action_id).is_(None),
                    )
                    .values(action_id=row.id, updated_at=now)
                    .execution_options(synchronize_session=False)
                )
                if not bound.rowcount:
                    raise ConflictError(
                        f"invocation {invocation[0]} is no longer claimed by this executor; it was not run"
                    )
            db.add(
                ActionReceiptRow(
                    action_id=row.id,
                    kind="contract" if outcome == "started" else "outcome",
                    state=None,
                    data=_json(dict(contract or {}, outcome=outcome, detail=detail)),
                    created_at=now,
                )
            )
        return _action(row)

    def _lock_key(self, db: DbSession, user: str, tool: str, key: str) -> None:
        """Serialise the writers of one user's tool and idempotency key until the transaction ends
        (a PostgreSQL advisory transaction lock; SQLite writes are serial already)."""
        if self._sqlite:
            return
        digest = hashlib.sha256(f"{user}\0{tool}\0{key}".encode()).digest()
        db.connection().execute(
            text("SELECT pg_advisory_xact_lock(:k)"), {"k": int.from_bytes(digest[:8], "big", signed=True)}
        )

    def _claim_key(self, db: DbSession, user: str, tool: str, key: str) -> None:
        """Inside a write transaction: refuse a new call while another call with the same user,
        tool and idempotency key is ``started`` or being compensated."""
        self._lock_key(db, user, tool, key)
        busy = db.exec(
            select(ToolActionRow.id, ToolActionRow.outcome).where(
                col(ToolActionRow.user) == user,
                col(ToolActionRow.tool) == tool,
                col(ToolActionRow.idempotency_key) == key,
                or_(
                    col(ToolActionRow.outcome) == "started", col(ToolActionRow.recovery_state) == "recovering"
                ),
            )
        ).first()
        if busy is not None:
            what = "is running" if busy[1] == "started" else "is being compensated"
            raise KeyInUseError(
                f"{tool} was not run: an earlier call with idempotency key {key!r} (action {busy[0]}) {what}; "
                "retry once its outcome is known"
            )

    def begin_compensation(
        self, action_id: str, *, expect: Collection[str | None], data: dict[str, Any]
    ) -> str:
        """Move an action to ``recovering`` for its compensation, in one transaction with the check
        that no later call with its idempotency key ran (a keyed compensation would offset that
        call's effect too).

        Returns:
            ``"started"``, ``"state"`` (it was not in one of ``expect``) or ``"later"`` (a later
            call with the key ran); nothing is written unless ``"started"``.
        """
        with self._tx(f"starting the compensation of action {action_id}", write=True) as db:
            row = db.get(ToolActionRow, action_id)
            if row is None or row.recovery_state not in expect:
                return "state"
            if row.idempotency_key is not None:
                self._lock_key(db, row.user, row.tool, row.idempotency_key)
                if db.exec(select(ToolActionRow.id).where(*self._later_than(_action(row))).limit(1)).first():
                    return "later"
            row.recovery_state = "recovering"
            db.add(row)
            db.add(
                ActionReceiptRow(
                    action_id=action_id,
                    kind="compensation",
                    state="recovering",
                    data=_json(data),
                    created_at=self._clock(),
                )
            )
            return "started"

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
        with self._tx(f"recording the outcome of action {action_id}", write=True) as db:
            return self._finish_action(
                db, action_id, outcome=outcome, detail=detail, data=data, answered=answered
            )

    def _finish_action(
        self,
        db: DbSession,
        action_id: str,
        *,
        outcome: str,
        detail: str | None,
        data: dict[str, Any] | None,
        answered: bool = False,
    ) -> bool:
        if outcome not in ("completed", "not_executed", "uncertain"):
            raise ValueError(f"an outcome is completed, not_executed or uncertain, got {outcome!r}")
        now = self._clock()
        values: dict[str, Any] = {"outcome": outcome, "detail": detail, "finished_at": now}
        if answered:
            values["dispatch_ended_at"] = now
        state = None
        if outcome == "uncertain":
            row = db.get(ToolActionRow, action_id)
            if row is None or row.recovery_state is None:  # a person's remedy meanwhile is kept
                state = "effect_unconfirmed"
                seconds = row.deadline_seconds if row is not None else 3600.0
                values["recovery_state"] = state
                values["deadline_at"] = now + timedelta(seconds=seconds)
        result = db.exec(
            update(ToolActionRow)
            .where(col(ToolActionRow.id) == action_id, col(ToolActionRow.outcome) == "started")
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if not result.rowcount:
            return False
        db.add(
            ActionReceiptRow(
                action_id=action_id,
                kind="outcome",
                state=state,
                data=_json(dict(data or {}, outcome=outcome, detail=detail)),
                created_at=now,
            )
        )
        return True

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
            ValueError: ``limit`` < 1 or an unknown outcome.
        """
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        if outcome is not None and outcome not in ACTION_OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(ACTION_OUTCOMES)}, got {outcome!r}")
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

    def open_dispatches(self, now: datetime) -> list[ToolAction]:
        """Unresolved actions whose request may still land on a transport Octipus has not ended
        (a recorded dispatch, no ``dispatch_ended_at``, the in-flight bound not passed), oldest
        first: at start-up, what a stopped daemon left in flight."""
        query = (
            select(ToolActionRow)
            .where(
                _unresolved(),
                col(ToolActionRow.dispatch).is_not(None),
                col(ToolActionRow.dispatch_ended_at).is_(None),
                or_(col(ToolActionRow.in_flight_until).is_(None), col(ToolActionRow.in_flight_until) > now),
            )
            .order_by(col(ToolActionRow.started_at), col(ToolActionRow.id))
        )
        with self._tx("reading actions whose request may still land") as db:
            return [_action(r) for r in db.exec(query).all()]

    def orphan_started_actions(self, *, owner: str) -> list[ToolAction]:
        """Mark ``started`` records of other daemon instances ``uncertain`` (run at start-up).

        With one active backend per database, a record still ``started`` by another instance
        lost its completion evidence when that instance stopped (seed 000: orphans count as
        uncertain). Records of ``owner`` (this instance) are left alone.

        Returns:
            The records changed (as they are now).
        """
        with self._tx("marking orphaned actions uncertain", write=True) as db:
            rows = db.exec(
                select(ToolActionRow).where(
                    col(ToolActionRow.outcome) == "started", col(ToolActionRow.owner) != owner
                )
            ).all()
            changed: list[str] = []
            for row in rows:
                detail = f"orphaned: the daemon instance {row.owner} stopped before recording an outcome"
                if self._finish_action(db, row.id, outcome="uncertain", detail=detail, data={"orphan": True}):
                    changed.append(row.id)
            db.expire_all()  # the UPDATEs bypassed the identity map
            out = [db.get(ToolActionRow, i) for i in changed]
            return [_action(r) for r in out if r is not None]

    def set_recovery_state(
        self,
        action_id: str,
        *,
        state: str,
        kind: str,
        data: dict[str, Any] | None = None,
        expect: Collection[str | None] | None = None,
    ) -> bool:
        """Move an uncertain action to a new recovery state and append the receipt entry.

        Args:
            action_id: The action.
            state: The new seed 004 state.
            kind: Receipt kind (``probe``, ``compensation``, ``escalated``, ``contained``...).
            data: Receipt evidence.
            expect: Change only from one of these states (None: from any); a lost race
                returns False and writes nothing.

        Returns:
            True if changed.
        """
        conditions: list[Any] = []
        if expect is not None:
            allowed = [s for s in expect if s is not None]
            state_in = col(ToolActionRow.recovery_state).in_(allowed)
            conditions.append(
                or_(col(ToolActionRow.recovery_state).is_(None), state_in) if None in expect else state_in
            )
        return self._change_action(
            f"changing the recovery state of action {action_id}",
            action_id,
            conditions,
            {"recovery_state": state},
            kind=kind,
            state=state,
            data=data or {},
        )

    def _change_action(
        self,
        what: str,
        action_id: str,
        conditions: list[Any],
        values: dict[str, Any],
        *,
        kind: str,
        state: str | None,
        data: dict[str, Any],
    ) -> bool:
        """Update one action where ``conditions`` hold and append a receipt entry, in one
        transaction; False (nothing written) when the conditions did not hold."""
        with self._tx(what, write=True) as db:
            result = db.exec(
                update(ToolActionRow)
                .where(col(ToolActionRow.id) == action_id, *conditions)
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            if not result.rowcount:
                return False
            db.add(
                ActionReceiptRow(
                    action_id=action_id, kind=kind, state=state, data=_json(data), created_at=self._clock()
                )
            )
            return True

    def add_receipt(
        self, action_id: str, *, kind: str, data: dict[str, Any], state: str | None = None
    ) -> None:
        """Append one receipt entry without changing the action.

        Raises:
            NotFoundError: no such action.
        """
        with self._tx(f"adding to the receipt of action {action_id}", write=True) as db:
            if db.get(ToolActionRow, action_id) is None:
                raise NotFoundError(f"action {action_id} not found")
            db.add(
                ActionReceiptRow(
                    action_id=action_id, kind=kind, state=state, data=_json(data), created_at=self._clock()
                )
            )

    def end_dispatch(self, action_id: str, *, data: dict[str, Any]) -> bool:
        """Record that Octipus positively ended the transport of an action's request.

        From then on no dispatched request of it can land, so a probe's ``not_applied`` settles
        it. Written once (the first end counts), with a ``dispatch_ended`` receipt entry.

        Returns:
            True if this call recorded it.
        """
        return self._change_action(
            f"recording the end of action {action_id}'s transport",
            action_id,
            [col(ToolActionRow.dispatch_ended_at).is_(None)],
            {"dispatch_ended_at": self._clock()},
            kind="dispatch_ended",
            state=None,
            data=data,
        )

    def reopen_action(self, action_id: str, *, data: dict[str, Any]) -> bool:
        """Reopen a settled action whose effect appeared after it was settled as not applied.

        The action goes to ``needs_operator``, loses the review that acknowledged it (it blocks
        later mutations again until a person reviews it) and gets a ``correction`` receipt
        entry (``data`` names the earlier and the new evidence).

        Returns:
            True if it was reopened (False: it was no longer ``verified``).
        """
        return self._change_action(
            f"reopening action {action_id}",
            action_id,
            [col(ToolActionRow.recovery_state) == "verified"],
            {"recovery_state": "needs_operator", "review_id": None, "reviewed_by": None, "reviewed_at": None},
            kind="correction",
            state="needs_operator",
            data=data,
        )

    def list_receipts(self, action_id: str) -> list[ActionReceipt]:
        """Return an action's receipt entries in order."""
        with self._tx(f"reading the receipt of action {action_id}") as db:
            rows = db.exec(
                select(ActionReceiptRow)
                .where(col(ActionReceiptRow.action_id) == action_id)
                .order_by(col(ActionReceiptRow.id))
            ).all()
            return [_receipt(r) for r in rows]

    def due_actions(self, now: datetime) -> list[ToolAction]:
        """Unresolved uncertain actions whose escalation deadline has passed, still unconfirmed."""
        with self._tx("reading actions past their deadline") as db:
            rows = db.exec(
                select(ToolActionRow).where(
                    _unresolved(),
                    col(ToolActionRow.recovery_state).in_(("effect_unconfirmed", "recovering")),
                    col(ToolActionRow.deadline_at) <= now,
                )
            ).all()
            return [_action(r) for r in rows]

    def next_action_deadline(self) -> datetime | None:
        """The earliest deadline of an unresolved, unconfirmed action (None: nothing owed)."""
        with self._tx("reading the next action deadline") as db:
            value = db.exec(
                select(func.min(ToolActionRow.deadline_at)).where(
                    _unresolved(), col(ToolActionRow.recovery_state).in_(("effect_unconfirmed", "recovering"))
                )
            ).first()
            return value if isinstance(value, datetime) else None

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
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            db.exec(delete(ActionReceiptRow).where(col(ActionReceiptRow.action_id).in_(chunk)))
            db.exec(delete(ToolActionRow).where(col(ToolActionRow.id).in_(chunk)))

    # Invocations -------------------------------------------------------------------------

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
    ) -> tuple[ToolInvocation, bool]:
        """Record a hand-started call, or return the one already recorded for ``request_id``.

        Args:
            user: Who starts it.
            session_id: Its session.
            tool: Tool id.
            arguments: Its arguments (kept until it ends).
            args_hash: SHA-256 of the canonical JSON arguments.
            request_id: The client's idempotency key (None: every request is new).
            status: ``awaiting_approval``, ``approved`` or ``denied``.

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
            id=_new_id(),
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

    def set_invocation_approval(self, invocation_id: str, approval_id: str) -> None:
        """Link an invocation awaiting approval to its approval record."""
        with self._tx(f"linking invocation {invocation_id}", write=True) as db:
            db.exec(
                update(ToolInvocationRow)
                .where(col(ToolInvocationRow.id) == invocation_id)
                .values(approval_id=approval_id, updated_at=self._clock())
                .execution_options(synchronize_session=False)
            )

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

    def refuse_invocation(self, invocation_id: str, reason: str) -> None:
        """End a ``denied`` invocation at once (policy rejection: nothing ran)."""
        now = self._clock()
        with self._tx(f"refusing invocation {invocation_id}", write=True) as db:
            db.exec(
                update(ToolInvocationRow)
                .where(col(ToolInvocationRow.id) == invocation_id, col(ToolInvocationRow.status) == "denied")
                .values(error=reason, arguments=None, finished_at=now, updated_at=now, is_error=True)
                .execution_options(synchronize_session=False)
            )

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
                    db, row.action_id, outcome=outcome, detail=detail, data=None, answered=answered
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
