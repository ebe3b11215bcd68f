"""Store methods for the recovery of uncertain actions (mixed into :class:`Store`; seed 004).

Recovery states and their receipt entries (``set_recovery_state``; one guarded ``UPDATE`` and
the receipt entry in one transaction), the start of a compensation, the end of a request's
transport, reopening after a correction, the escalation deadlines, and the actions whose
request may still land on a transport not yet ended. The journal records themselves are in
:mod:`octipusd.store.journal_store`.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, func, literal, or_, update
from sqlmodel import col, select

from octipusd.errors import NotFoundError
from octipusd.store.codec import StoreMixin
from octipusd.store.journal_sql import ACTIONS, INSERT_RECEIPT
from octipusd.store.journal_store import (
    ActionReceipt,
    ToolAction,
    _action,
    _json,
    _receipt,
    _unresolved,
)
from octipusd.store.models import ActionReceiptRow, ToolActionRow

__all__ = ["RecoveryStoreMixin"]

#: The evidence of an orphaned record: before and after the id of the instance that ran it.
_ORPHAN_DETAIL = ("orphaned: the daemon instance ", " stopped before recording an outcome")


class RecoveryStoreMixin(StoreMixin):
    """Recovery states, receipts, compensations, transports and deadlines; see the module docstring.

    Mixed into :class:`~octipusd.store.Store`, which provides ``_tx`` and ``_clock``, and (from
    :class:`~octipusd.store.journal_store.JournalStoreMixin`) ``_lock_key`` and ``_later_than``.
    """

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
                self._lock_key(db.connection(), row.user, row.tool, row.idempotency_key)
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

    def orphan_started_actions(self, *, owner: str) -> list[ToolAction]:
        """Mark ``started`` records of other daemon instances ``uncertain`` (run at start-up).

        With one active backend per database, a record still ``started`` by another instance
        lost its completion evidence when that instance stopped (seed 000: orphans count as
        uncertain). Records of ``owner`` (this instance) are left alone. Each orphan gets what
        :meth:`finish_action` gives an ``uncertain`` outcome (recovery state
        ``effect_unconfirmed`` and its escalation deadline, unless a remedy already set a
        state) and an ``outcome`` receipt entry.

        Set-based, in one write transaction: the orphans are read (through the index on
        ``outcome``; locked on PostgreSQL), changed by one ``UPDATE`` (their deadlines by a
        ``CASE`` over their distinct ``deadline_seconds``) and their receipt entries inserted
        in one batch. No other writer can add an orphan meanwhile: a second daemon on the
        database is refused by the store lock.

        Returns:
            The records changed (as they are now), oldest first.
        """
        orphaned = (ACTIONS.c.outcome == "started") & (ACTIONS.c.owner != owner)
        found = select(ACTIONS.c.id, ACTIONS.c.recovery_state, ACTIONS.c.deadline_seconds).where(orphaned)
        with self._core("marking orphaned actions uncertain", write=True) as conn:
            before = {r.id: r for r in conn.execute(found if self._sqlite else found.with_for_update())}
            if not before:
                return []
            now = self._clock()
            seconds = {r.deadline_seconds for r in before.values()}
            deadline = case(
                {s: literal(now + timedelta(seconds=s), type_=ACTIONS.c.deadline_at.type) for s in seconds},
                value=ACTIONS.c.deadline_seconds,
                else_=ACTIONS.c.deadline_at,
            )
            unset = ACTIONS.c.recovery_state.is_(None)  # a person's remedy meanwhile is kept
            rows = conn.execute(
                update(ACTIONS)
                .where(orphaned)
                .values(
                    outcome="uncertain",
                    detail=literal(_ORPHAN_DETAIL[0]) + ACTIONS.c.owner + literal(_ORPHAN_DETAIL[1]),
                    finished_at=now,
                    recovery_state=case((unset, "effect_unconfirmed"), else_=ACTIONS.c.recovery_state),
                    deadline_at=case((unset, deadline), else_=ACTIONS.c.deadline_at),
                )
                .returning(*ACTIONS.c)
            ).all()
            receipts = []
            for row in rows:
                unchanged = row.id in before and before[row.id].recovery_state is not None
                data = {"orphan": True, "outcome": "uncertain", "detail": row.detail}
                receipts.append(
                    {
                        "action_id": row.id,
                        "kind": "outcome",
                        "state": None if unchanged else "effect_unconfirmed",
                        "data": _json(data),
                        "created_at": now,
                    }
                )
            conn.execute(INSERT_RECEIPT, receipts)
        return sorted((_action(r) for r in rows), key=lambda a: (a.started_at, a.id))

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
