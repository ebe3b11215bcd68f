"""Evidence-driven recovery of uncertain actions (seed 004 "Implementation pattern").

:class:`RecoveryOperator` drives an uncertain action's recovery state from evidence, never
from exceptions: it runs the tool's verification probe (``effect_unconfirmed`` -> ``verified``
when the probe says applied, or not applied once no dispatched request of the action can still
land; an ambiguous or failed probe, or "not applied" while a request may still land, leaves it
unconfirmed), its compensation (``recovering`` -> ``compensated``, or ``needs_operator`` when
the compensation fails), records containment by a person (``contained``), and hands actions
still unconfirmed past their deadline to their named owner (``needs_operator``, with the
receipt). Every step appends to the action's receipt. Nothing here retries the action itself:
an unknown result is never labelled failed, and recovery never re-runs a call that may have
run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import anyio

from octipusd.errors import ConflictError, NotFoundError, OctipusError, describe_error
from octipusd.store.aio import in_thread
from octipusd.store.journal_store import ActionReceipt, ToolAction
from octipusd.store.repository import Store
from octipusd.toolkit import (
    DETAIL_CHARS,
    ActionRef,
    ProbeResult,
    ProbeStatus,
    ProbeVerdict,
    RecoveryContract,
    RecoveryState,
)

__all__ = [
    "ContractLookup",
    "Escalation",
    "RecoveryOperator",
    "in_flight_note",
    "in_flight_time",
    "in_flight_warning",
]

log = logging.getLogger("octipusd.journal")

#: ``(tool id) -> contract``: the current contract of a tool (None: unknown tool); a lookup of
#: the configuration, it raises nothing.
ContractLookup = Callable[[str], RecoveryContract | None]
#: ``async (run_id | None, kind, data)``: publish an event (e.g. to the action's run); raises
#: at most an :class:`~octipusd.errors.OctipusError` (the event could not be stored).
Notify = Callable[[str | None, str, dict[str, Any]], Awaitable[None]]

#: Deadline of one probe or compensation (seconds).
OPERATION_TIMEOUT_SECONDS = 60.0
#: Most earlier uncertain calls of one user, tool and idempotency key read to judge a retry.
SAME_KEY_LIMIT = 1000
_UNSETTLED = (RecoveryState.EFFECT_UNCONFIRMED.value, RecoveryState.RECOVERING.value, None)
#: States a person's remedies (an explicit probe, a compensation) still apply to: the deadline
#: or a failed compensation escalates an action, it does not remove its remedies.
_REMEDIABLE = (*_UNSETTLED, RecoveryState.NEEDS_OPERATOR.value)


#: States a compensation may start from (not while one runs).
_COMPENSABLE = (
    None,
    RecoveryState.EFFECT_UNCONFIRMED.value,
    RecoveryState.VERIFIED.value,
    RecoveryState.NEEDS_OPERATOR.value,
)


def _why(exc: BaseException) -> str:
    """One line naming a failure (its Octipus message when it has one)."""
    return describe_error(exc)[:DETAIL_CHARS]


def _iso(moment: datetime | None) -> str | None:
    return in_flight_time(moment) if moment is not None else None


def in_flight_time(moment: datetime) -> str:
    """An in-flight bound as shown to people (ISO 8601, rounded *up* to the second, so that the
    time shown is never before the real bound)."""
    if moment.microsecond:
        moment = moment.replace(microsecond=0) + timedelta(seconds=1)
    return moment.isoformat(timespec="seconds")


def in_flight_warning(until: datetime | None) -> str:
    """Says that a dispatched request of an action may still land, and until when."""
    if until is None:
        return "a request may still be in flight (no bound is known): a person decides"
    return f"a request may still be in flight until {_iso(until)}"


def in_flight_note(until: datetime | None) -> str:
    """The evidence line of a "not applied" answer given while a request may still land."""
    return f"not applied yet; {in_flight_warning(until)}"


@dataclass(frozen=True)
class Escalation:
    """One action handed to its owner past the deadline.

    Attributes:
        action: The action as it was.
        owner: Who receives it (the contract's owner or the user it ran for).
    """

    action: ToolAction
    owner: str


def _ref(action: ToolAction) -> ActionRef:
    return ActionRef(
        action_id=action.id,
        tool=action.tool,
        idempotency_key=action.idempotency_key,
        session_id=action.session_id,
        user=action.user,
    )


class RecoveryOperator:
    """Probes, compensates, contains and escalates uncertain actions (see the module docstring).

    Args:
        store: The store.
        contracts: Looks up a tool's current contract (probe and compensation live there).
        notify: Publishes ``action_escalated`` and similar events (may be None).
    """

    def __init__(self, store: Store, contracts: ContractLookup, notify: Notify | None = None) -> None:
        self.store = store
        self.contracts = contracts
        self.notify = notify

    def _contract(self, action: ToolAction) -> RecoveryContract | None:
        return self.contracts(action.tool)

    async def _run_probe(self, action: ToolAction, contract: RecoveryContract) -> ProbeResult:
        assert contract.probe is not None
        try:
            with anyio.fail_after(OPERATION_TIMEOUT_SECONDS):
                return await contract.probe(_ref(action))
        except Exception as exc:  # the failure is the evidence: the answer is "unknown"
            log.warning("the probe of action %s failed", action.id, exc_info=exc)
            return ProbeResult(ProbeStatus.UNKNOWN, f"the probe failed: {_why(exc)}"[:DETAIL_CHARS])

    async def probe(self, action: ToolAction, *, explicit: bool = False) -> ProbeVerdict | None:
        """Run the action's verification probe once and record what it saw.

        ``applied`` settles the action (``verified``). ``not_applied`` settles it only once no
        dispatched request of it can still land (:meth:`ToolAction.may_still_land`, judged at
        the moment the probe *started*: its in-flight bound had passed or its transport was
        ended); before that the answer is kept as evidence ("not applied yet; a request may
        still be in flight until T") and the action stays unconfirmed. ``unknown`` (an outage,
        an ambiguous or partial effect) leaves it unconfirmed, and so does any answer while a
        compensation runs (``recovering``: the compensation may have removed the effect). The
        action is read afresh first.

        Args:
            action: The action (only its id is trusted).
            explicit: A person asked for this probe: an action handed to its owner
                (``needs_operator``) can still be settled by it, and a ``verified`` one is
                checked again (:meth:`recheck`).

        Returns:
            The verdict, or None when the tool declares no probe or the action is not awaiting
            confirmation.
        """
        try:
            action = await in_thread(self.store.get_action, action.id)
        except NotFoundError:
            return None
        if explicit and action.recovery_state == RecoveryState.VERIFIED.value:
            return await self.recheck(action)
        allowed = _REMEDIABLE if explicit else _UNSETTLED
        if action.outcome not in ("uncertain", "started") or action.recovery_state not in allowed:
            return None
        contract = self._contract(action)
        if contract is None or contract.probe is None:
            return None
        pending = action.may_still_land(self.store.now())  # before the probe looks
        result = await self._run_probe(action, contract)
        data: dict[str, Any] = {"status": str(result.status), "detail": result.detail}
        if result.status is ProbeStatus.NOT_APPLIED and pending:
            data["in_flight_until"] = _iso(action.in_flight_until)
            data["note"] = in_flight_note(action.in_flight_until)
        elif action.recovery_state == RecoveryState.RECOVERING.value:
            data["note"] = "a compensation is running; the answer is kept as evidence only"
        if result.status is ProbeStatus.UNKNOWN or "note" in data:
            await in_thread(lambda: self.store.add_receipt(action.id, kind="probe", data=data))
            return ProbeVerdict(result, False, action.in_flight_until if pending else None)
        settle = tuple(s for s in allowed if s != RecoveryState.RECOVERING.value)
        moved = await in_thread(
            lambda: self.store.set_recovery_state(
                action.id, state=RecoveryState.VERIFIED.value, kind="probe", data=data, expect=settle
            )
        )
        if not moved:  # a concurrent probe or a person settled it first: say what it is now
            await in_thread(lambda: self.store.add_receipt(action.id, kind="probe", data=data))
            moved = (await in_thread(self.store.get_action, action.id)).resolved
        return ProbeVerdict(result, moved)

    async def recheck(self, action: ToolAction) -> ProbeVerdict | None:
        """Probe a ``verified`` action again: an effect found after a ``not_applied`` settlement
        reopens it (seed 004: the receipt never keeps saying "not applied" for an effect that
        appeared).

        The reopened action is ``needs_operator`` and blocks again; its ``correction`` receipt
        entry names the earlier settlement and the new finding, and an ``action_escalated``
        event goes to its run. When a later call of the same tool with the same idempotency key
        ran (its effect is indistinguishable to the probe), the answer is only recorded.

        Returns:
            The verdict (``correction`` set when it reopened the action), or None when the action
            is not verified or its tool declares no probe.
        """
        if action.recovery_state != RecoveryState.VERIFIED.value:
            return None
        contract = self._contract(action)
        if contract is None or contract.probe is None:
            return None
        earlier = await self.settled_probe(action)
        result = await self._run_probe(action, contract)
        data: dict[str, Any] = {"status": str(result.status), "detail": result.detail, "recheck": True}
        contradicts = (
            result.status is ProbeStatus.APPLIED
            and earlier is not None
            and earlier.data.get("status") == ProbeStatus.NOT_APPLIED.value
        )
        if contradicts and await in_thread(self.store.later_call_with_key, action):
            data["note"] = "a later call with the same idempotency key ran; its effect cannot be told apart"
            contradicts = False
        if not contradicts or earlier is None:
            await in_thread(lambda: self.store.add_receipt(action.id, kind="probe", data=data))
            return ProbeVerdict(result, False)
        reason = "the effect appeared after the action was verified as not applied; review it again"
        correction: dict[str, Any] = {
            "earlier": {
                "receipt_id": earlier.id,
                "at": earlier.created_at.isoformat(),
                "status": ProbeStatus.NOT_APPLIED.value,
                "detail": earlier.data.get("detail"),
            },
            "now": {"status": ProbeStatus.APPLIED.value, "detail": result.detail},
            "reason": reason,
        }
        reopened = await in_thread(lambda: self.store.reopen_action(action.id, data=correction))
        if reopened:
            await self._escalate_event(action, self._owner(action, contract), reason)
        else:  # it left verified meanwhile: keep the finding anyway
            await in_thread(lambda: self.store.add_receipt(action.id, kind="probe", data=data))
        return ProbeVerdict(result, False, correction=reopened)

    async def look(self, action: ToolAction) -> ProbeResult | None:
        """Run the action's probe and record its answer as evidence only (the state is unchanged).

        For actions handed to their owner, before a retry: seeing the effect there refuses the
        retry without settling the action behind the owner's back.

        Returns:
            The probe's answer, or None when the tool declares no probe.
        """
        contract = self._contract(action)
        if contract is None or contract.probe is None:
            return None
        result = await self._run_probe(action, contract)
        data = {"status": str(result.status), "detail": result.detail, "note": "checked before a retry"}
        await in_thread(lambda: self.store.add_receipt(action.id, kind="probe", data=data))
        return result

    async def settled_probe(self, action: ToolAction) -> ActionReceipt | None:
        """The receipt entry of the probe that settled a ``verified`` action (None: none)."""
        receipts = await in_thread(self.store.list_receipts, action.id)
        probes = [r for r in receipts if r.kind == "probe" and r.state == RecoveryState.VERIFIED.value]
        return probes[-1] if probes else None

    async def compensate(self, action: ToolAction, *, by: str) -> str:
        """Run the action's declared compensation (a person asks for it).

        Also for an action handed to its owner (``needs_operator``: escalated past its deadline,
        reopened, or whose compensation failed before): the owner compensates it once the
        backend is back.

        Returns:
            The compensation's one-line detail (state ``compensated``).

        Raises:
            NotFoundError: the tool declares no compensation.
            ConflictError: the action is not uncertain, already compensated, contained or being
                compensated, a request of it may still land (an offset made now would not cover
                an effect that lands later), or a later call with the same key ran.
            OctipusError: the compensation failed; the action is now ``needs_operator``.
        """
        action = await in_thread(self.store.get_action, action.id)
        if action.outcome not in ("uncertain", "started"):
            raise ConflictError(
                f"action {action.id} is {action.outcome}; only uncertain actions are compensated"
            )
        contract = self._contract(action)
        if contract is None or contract.compensation is None:
            raise NotFoundError(f"{action.tool} declares no compensation; review the action instead")
        await self._check_compensable(action)
        begun = await in_thread(
            lambda: self.store.begin_compensation(action.id, expect=_COMPENSABLE, data={"started_by": by})
        )
        if begun == "later":
            raise ConflictError(
                f"action {action.id} is not compensated: a later call with the same idempotency key "
                f"({action.idempotency_key!r}) ran, and its compensation would offset that call's effect too; "
                f"check the effect yourself, then `octipusctl actions contain {action.id} --note TEXT`"
            )
        if begun != "started":
            now = await in_thread(self.store.get_action, action.id)
            raise ConflictError(f"action {action.id} is already {now.recovery_state}; nothing to compensate")
        try:
            with anyio.fail_after(OPERATION_TIMEOUT_SECONDS):
                detail = await contract.compensation(_ref(action))
        except Exception as exc:  # the failure is the evidence: the action needs an operator
            await self._compensation_failed(action, contract, exc, by=by)
            raise OctipusError(
                f"the compensation of action {action.id} failed ({_why(exc)}); it now needs an operator"
            ) from exc
        await in_thread(
            lambda: self.store.set_recovery_state(
                action.id,
                state=RecoveryState.COMPENSATED.value,
                kind="compensation",
                data={"detail": str(detail)[:DETAIL_CHARS], "by": by},
                expect=(RecoveryState.RECOVERING.value,),
            )
        )
        return str(detail)

    async def _check_compensable(self, action: ToolAction) -> None:
        """Refuse a compensation that would not offset exactly this action's effect.

        Raises:
            ConflictError: a request of it may still land (unless its probe already found the
                effect: the request has landed). (A later call with the same key is checked when
                the compensation begins, in the same transaction.)
        """
        if action.may_still_land(self.store.now()):
            settled = await self.settled_probe(action)
            if settled is None or settled.data.get("status") != ProbeStatus.APPLIED.value:
                raise ConflictError(
                    f"action {action.id} is not compensated now: {in_flight_warning(action.in_flight_until)}, "
                    "and an offset made before it lands would not cover it; compensate after that, or contain it"
                )

    async def _compensation_failed(
        self, action: ToolAction, contract: RecoveryContract, exc: Exception, *, by: str
    ) -> None:
        """Hand the action to its owner after a failed compensation (the failure is the evidence)."""
        why = _why(exc)
        log.warning("the compensation of action %s failed: %s", action.id, why, exc_info=exc)
        await in_thread(
            lambda: self.store.set_recovery_state(
                action.id,
                state=RecoveryState.NEEDS_OPERATOR.value,
                kind="compensation",
                data={"failed": why, "by": by},
                expect=(RecoveryState.RECOVERING.value,),
            )
        )
        await self._escalate_event(action, self._owner(action, contract), f"compensation failed: {why}")

    async def contain(self, action: ToolAction, *, by: str, note: str) -> None:
        """Record that a person contained the effect (state ``contained``).

        Raises:
            ConflictError: the action is not an unsettled uncertain action.
        """
        if action.outcome not in ("uncertain", "started"):
            raise ConflictError(
                f"action {action.id} is {action.outcome}; only uncertain actions are contained"
            )
        moved = await in_thread(
            lambda: self.store.set_recovery_state(
                action.id,
                state=RecoveryState.CONTAINED.value,
                kind="contained",
                data={"by": by, "note": note[:DETAIL_CHARS]},
                expect=(*_UNSETTLED, RecoveryState.NEEDS_OPERATOR.value),
            )
        )
        if not moved:
            raise ConflictError(f"action {action.id} is already {action.recovery_state}")

    async def escalate_due(self, now: datetime) -> list[Escalation]:
        """Hand every action still unconfirmed past its deadline to its owner.

        Each is probed once more first; if still unsettled it becomes ``needs_operator`` with
        an ``escalated`` receipt entry naming the owner, and an ``action_escalated`` event is
        published to its run.

        Returns:
            The escalations made.
        """
        due = await in_thread(self.store.due_actions, now)
        made: list[Escalation] = []
        for action in due:
            probed = await self.probe(action)
            if probed is not None and probed.settled:
                continue
            contract = self._contract(action)
            owner = self._owner(action, contract)
            moved = await in_thread(self._escalate_record, action, owner)
            if moved:
                made.append(Escalation(action, owner))
                await self._escalate_event(action, owner, "still unconfirmed past its deadline")
        return made

    def _escalate_record(self, action: ToolAction, owner: str) -> bool:
        return self.store.set_recovery_state(
            action.id,
            state=RecoveryState.NEEDS_OPERATOR.value,
            kind="escalated",
            data={
                "owner": owner,
                "reason": "still unconfirmed past its deadline",
                "deadline_at": str(action.deadline_at),
            },
            expect=(None, RecoveryState.EFFECT_UNCONFIRMED.value),  # never a running compensation
        )

    @staticmethod
    def _owner(action: ToolAction, contract: RecoveryContract | None) -> str:
        if action.recovery_owner:
            return action.recovery_owner
        if contract is not None and contract.owner:
            return contract.owner
        return action.user

    async def _escalate_event(self, action: ToolAction, owner: str, reason: str) -> None:
        if self.notify is None:
            return
        try:
            await self.notify(
                action.run_id,
                "action_escalated",
                {"action_id": action.id, "tool": action.tool, "owner": owner, "reason": reason},
            )
        except OctipusError as exc:  # the store failed: the escalation itself is recorded
            log.warning("could not publish the escalation of action %s: %s", action.id, exc.message)
