"""The recovery review gate (seed 000 "What the user sees") and the contract gate (seed 004).

Before a mutating call runs, :meth:`RecoveryGate.check`:

1. refuses an ``irreversible`` action in unattended work (seed 004: irreversible actions move
   to explicit human control);
2. reads the user's and session's unresolved records (uncertain, or ``started`` and not
   running in this process), oldest first, in batches of at most 20;
3. probes those whose tool declares a verification probe (seed 004: an ``effect_unconfirmed``
   action is probed before any retry); a probe that settles a record removes it from the
   review. A "not applied" answer settles nothing while a dispatched request of the action may
   still land: the review shows until when (``in_flight_until``);
4. asks a person for a recovery review covering exactly that batch (approval kind
   ``action_recovery``); unattended work cannot approve its own recovery and reports that
   review is required; a denial refuses the call and keeps the evidence;
5. after an approval, reads again: a record that became uncertain while the person decided,
   or the next batch, needs its own review. The rules are re-checked after each approval (a
   permission revoked meanwhile still denies).

Read-only and internal tools never come here. Approving permits further mutations; it does
not prove the earlier action failed, relabel it, or become a permanent permission.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol

from octipusd.errors import OctipusError
from octipusd.journal.executor import ActionJournal, ActionScope
from octipusd.journal.operator import RecoveryOperator, in_flight_time, in_flight_warning
from octipusd.journal.retry import duplicate_refusal
from octipusd.store.aio import in_thread
from octipusd.store.journal_store import ToolAction
from octipusd.store.repository import Store
from octipusd.toolkit import CallContext, GateResult, RecoveryContract, RiskClass

__all__ = [
    "REVIEW_BATCH",
    "REVIEW_NOTE",
    "RUN_NOW",
    "RecoveryAsker",
    "RecoveryGate",
    "describe_actions",
    "landing_until",
    "wait_note",
]

log = logging.getLogger("octipusd.journal")

#: Most records one recovery review covers (seed 000).
REVIEW_BATCH = 20
#: Bound on consecutive reviews for one call (a safety net; each review is a person's answer).
_MAX_ROUNDS = 50

#: ``async (run_id, kind, data)``: store and publish a run event; raises at most an
#: :class:`~octipusd.errors.OctipusError` (the event could not be stored).
Emit = Callable[[str, str, dict[str, Any]], Awaitable[object]]


class RecoveryAsker(Protocol):
    """What the review gate needs from the permission gate (:class:`~octipusd.policy.gate.PermissionGate`)."""

    async def ask_recovery(
        self,
        ctx: CallContext,
        tool_id: str,
        arguments: Mapping[str, Any],
        *,
        action_ids: list[str],
        summary: dict[str, Any],
        explanation: str,
    ) -> GateResult:
        """Ask for a recovery review; see :meth:`PermissionGate.ask_recovery`."""
        ...


def describe_actions(actions: list[ToolAction], now: datetime) -> list[dict[str, Any]]:
    """What a reviewer is shown of each record (never argument bodies).

    A record whose dispatched request may still land carries ``in_flight_until`` and a
    ``note`` saying so (None when no request of it can land any more).
    """
    out = []
    for a in actions:
        pending = a.may_still_land(now)
        out.append(
            {
                "action_id": a.id,
                "tool": a.tool,
                "outcome": a.outcome if a.outcome != "started" else "started (no outcome recorded)",
                "detail": a.detail,
                "risk_class": a.risk_class,
                "recovery_state": a.recovery_state,
                "idempotency_key": a.idempotency_key,
                "started_at": a.started_at.isoformat(),
                "run_id": a.run_id,
                "in_flight_until": (
                    in_flight_time(a.in_flight_until) if pending and a.in_flight_until is not None else None
                ),
                "note": in_flight_warning(a.in_flight_until) if pending else None,
            }
        )
    return out


def landing_until(actions: Iterable[ToolAction], now: datetime) -> datetime | None:
    """Until when a dispatched request of one of ``actions`` may still land: the latest in-flight
    bound of those that may (None: none may, or no bound is known for those that may; then a
    person decides)."""
    bounds = [a.in_flight_until for a in actions if a.may_still_land(now) and a.in_flight_until is not None]
    return max(bounds) if bounds else None


#: The answer (a key of the approval's ``answers``) of a person who approves a recovery review and
#: has the reviewed call run at once, while a request of a reviewed action may still land.
RUN_NOW = "run_now"


def wait_note(tool_id: str, until: datetime) -> str:
    """What approving a review means for a call that waits until ``until`` (:func:`landing_until`)."""
    return (
        f"Approving runs {tool_id} only after {in_flight_time(until)}, once no request of these actions "
        "can land any more (both would land otherwise): check meanwhile whether the earlier request "
        "landed, and cancel the call if it did. Approve with run now (`--run-now`) to run it at once."
    )


#: What approving a recovery review means, shown with every review.
REVIEW_NOTE = (
    "Check whether these actions already took effect before allowing further changes. "
    "Approving permits further mutations; it does not prove the earlier actions failed. A retry "
    "with the same idempotency key as an action whose request may still land (in_flight_until) "
    "is refused until then. Denying refuses this call and keeps the evidence."
)


class RecoveryGate:
    """Checks a mutating call against the journal before it runs (see the module docstring).

    Args:
        store: The store.
        journal: The execution boundary (its live set separates running records from orphans).
        asker: The permission gate (asks people, re-checks rules).
        operator: Runs verification probes.
        emit: Stores and publishes run events.
        batch: Records per review (at most 20).
    """

    def __init__(
        self,
        store: Store,
        journal: ActionJournal,
        asker: RecoveryAsker,
        operator: RecoveryOperator,
        emit: Emit,
        *,
        batch: int = REVIEW_BATCH,
    ) -> None:
        if not 1 <= batch <= REVIEW_BATCH:
            raise ValueError(f"a review covers 1 to {REVIEW_BATCH} records, got {batch}")
        self.store = store
        self.journal = journal
        self.asker = asker
        self.operator = operator
        self.emit = emit
        self.batch = batch

    async def unresolved(self, scope: ActionScope) -> list[ToolAction]:
        """The next batch of records blocking mutations of ``scope``'s user and session."""
        live = set(self.journal.live)
        return await in_thread(
            lambda: self.store.blocking_actions(
                user=scope.user, session_id=scope.session_id, live=live, limit=self.batch
            )
        )

    async def check(
        self,
        ctx: CallContext,
        scope: ActionScope,
        tool_id: str,
        arguments: Mapping[str, Any],
        contract: RecoveryContract,
    ) -> GateResult:
        """Decide whether a mutating call may run now, as far as the journal is concerned.

        Args:
            ctx: The run and session asking (``attended``, ``review_required``...).
            scope: The journal scope (user and session) of the call.
            tool_id: The proposed call's tool.
            arguments: Its input.
            contract: Its recovery contract.

        Returns:
            Allowed, or denied with a reason for the model (and ``expired`` when a review was
            not answered in time, which fails a managed run).
        """
        if contract.risk_class is RiskClass.IRREVERSIBLE and not ctx.attended:
            note = (
                f"review required: {tool_id} is declared irreversible, and irreversible actions never run "
                "unattended; run it in an attended session, or declare its riskClass if it can be undone"
            )
            return await self._refuse_unattended(ctx, tool_id, note)
        probed: set[str] = set()
        reviewed = 0
        for _ in range(_MAX_ROUNDS):
            blocking = await self.unresolved(scope)
            if not blocking:
                # after the probes: a blind retry of an effect verified as applied is refused
                duplicate = await duplicate_refusal(
                    self.operator, scope, tool_id, arguments, contract, live=self.journal.live, fresh=probed
                )
                if duplicate is not None:
                    return GateResult(False, duplicate)
                reason = (
                    f"{reviewed} recovery review(s) approved" if reviewed else "no unresolved earlier actions"
                )
                return GateResult(True, reason)
            fresh = [a for a in blocking if a.id not in probed]
            if fresh:
                settled = False
                for action in fresh:
                    probed.add(action.id)
                    verdict = await self.operator.probe(action)
                    if verdict is not None and verdict.settled:
                        settled = True
                if settled:
                    continue
            ids = [a.id for a in blocking]
            if not ctx.attended:
                note = (
                    f"review required: {len(ids)} earlier action(s) of this session have an uncertain outcome "
                    f"({', '.join(ids)}); a person must review them (`octipusctl actions list --unresolved`) "
                    "before further changes, and this session is unattended"
                )
                now = self.store.now()
                landing = [a for a in blocking if a.may_still_land(now)]
                if landing:
                    note += "; " + "; ".join(
                        f"{a.id}: {in_flight_warning(a.in_flight_until)}" for a in landing
                    )
                return await self._refuse_unattended(ctx, tool_id, note)
            summary = {
                "proposed": {"tool": tool_id},
                "actions": describe_actions(blocking, self.store.now()),
                "note": REVIEW_NOTE,
            }
            explanation = (
                f"{len(ids)} earlier action(s) of this user and session have uncertain effects; "
                f"{tool_id} changes something, so a person reviews them first"
            )
            answer = await self.asker.ask_recovery(
                ctx, tool_id, arguments, action_ids=ids, summary=summary, explanation=explanation
            )
            if not answer.allowed:
                return GateResult(
                    False,
                    f"recovery review: {answer.reason}; the earlier actions stay unresolved "
                    "(`octipusctl actions list --unresolved`)",
                    expired=answer.expired,
                    approval_id=answer.approval_id,
                )
            reviewed += 1
        return GateResult(False, f"recovery review: more than {_MAX_ROUNDS} consecutive reviews; try again")

    async def _refuse_unattended(self, ctx: CallContext, tool_id: str, note: str) -> GateResult:
        ctx.review_required.append(note)
        try:
            await self.emit(ctx.run_id, "review_required", {"tool_id": tool_id, "reason": note})
        except OctipusError as exc:  # the event could not be stored; the refusal stands
            log.warning("could not publish review_required: %s", exc.message)
        return GateResult(False, note)
