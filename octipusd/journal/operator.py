"""Evidence-driven recovery of uncertain actions (seed 004 "Implementation pattern").

:class:`RecoveryOperator` drives an uncertain action's recovery state from evidence, never
from exceptions: it runs the tool's verification probe (``effect_unconfirmed`` -> ``verified``
when the probe says applied or not applied; an ambiguous or failed probe leaves it
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
from datetime import datetime
from typing import Any

import anyio

from octipusd.errors import ConflictError, NotFoundError, OctipusError
from octipusd.journal.contracts import (
    ActionRef,
    ProbeResult,
    ProbeStatus,
    RecoveryContract,
    RecoveryState,
)
from octipusd.store.aio import in_thread
from octipusd.store.journal_store import ToolAction
from octipusd.store.repository import Store

__all__ = ["ContractLookup", "Escalation", "RecoveryOperator"]

log = logging.getLogger("octipusd.journal")

#: ``(tool id) -> contract``: the current contract of a tool (None: unknown tool).
ContractLookup = Callable[[str], RecoveryContract | None]
#: ``async (run_id | None, kind, data)``: publish an event (e.g. to the action's run).
Notify = Callable[[str | None, str, dict[str, Any]], Awaitable[None]]

#: Deadline of one probe or compensation (seconds).
OPERATION_TIMEOUT_SECONDS = 60.0
_UNSETTLED = (RecoveryState.EFFECT_UNCONFIRMED.value, RecoveryState.RECOVERING.value, None)


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
        try:
            return self.contracts(action.tool)
        except Exception as exc:
            log.warning("contract lookup of %s failed: %r", action.tool, exc)
            return None

    async def probe(self, action: ToolAction) -> ProbeResult | None:
        """Run the action's verification probe once and record what it saw.

        ``applied`` / ``not_applied`` settle the action (``verified``); ``unknown`` (an outage,
        an ambiguous or partial effect) leaves it ``effect_unconfirmed``.

        Returns:
            The probe's result, or None when the tool declares no probe or the action is not
            awaiting confirmation.
        """
        if action.outcome not in ("uncertain", "started") or action.recovery_state not in _UNSETTLED:
            return None
        contract = self._contract(action)
        if contract is None or contract.probe is None:
            return None
        try:
            with anyio.fail_after(OPERATION_TIMEOUT_SECONDS):
                result = await contract.probe(_ref(action))
        except Exception as exc:
            result = ProbeResult(ProbeStatus.UNKNOWN, f"the probe failed: {type(exc).__name__}: {exc}"[:300])
        data = {"status": str(result.status), "detail": result.detail}
        if result.status is ProbeStatus.UNKNOWN:
            await in_thread(lambda: self.store.add_receipt(action.id, kind="probe", data=data))
        else:
            await in_thread(
                lambda: self.store.set_recovery_state(
                    action.id, state=RecoveryState.VERIFIED.value, kind="probe", data=data, expect=_UNSETTLED
                )
            )
        return result

    async def compensate(self, action: ToolAction, *, by: str) -> str:
        """Run the action's declared compensation (a person asks for it).

        Returns:
            The compensation's one-line detail (state ``compensated``).

        Raises:
            NotFoundError: the tool declares no compensation.
            ConflictError: the action is not uncertain, or already settled or being recovered.
            OctipusError: the compensation failed; the action is now ``needs_operator``.
        """
        if action.outcome not in ("uncertain", "started"):
            raise ConflictError(
                f"action {action.id} is {action.outcome}; only uncertain actions are compensated"
            )
        contract = self._contract(action)
        if contract is None or contract.compensation is None:
            raise NotFoundError(f"{action.tool} declares no compensation; review the action instead")
        moved = await in_thread(
            lambda: self.store.set_recovery_state(
                action.id,
                state=RecoveryState.RECOVERING.value,
                kind="compensation",
                data={"started_by": by},
                expect=(RecoveryState.EFFECT_UNCONFIRMED.value, RecoveryState.VERIFIED.value, None),
            )
        )
        if not moved:
            raise ConflictError(
                f"action {action.id} is already {action.recovery_state}; nothing to compensate"
            )
        try:
            with anyio.fail_after(OPERATION_TIMEOUT_SECONDS):
                detail = await contract.compensation(_ref(action))
        except Exception as exc:
            why = f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"[:300]
            await in_thread(
                lambda: self.store.set_recovery_state(
                    action.id,
                    state=RecoveryState.NEEDS_OPERATOR.value,
                    kind="compensation",
                    data={"failed": why, "by": by},
                )
            )
            await self._escalate_event(action, self._owner(action, contract), f"compensation failed: {why}")
            raise OctipusError(
                f"the compensation of action {action.id} failed ({why}); it now needs an operator"
            ) from exc
        await in_thread(
            lambda: self.store.set_recovery_state(
                action.id,
                state=RecoveryState.COMPENSATED.value,
                kind="compensation",
                data={"detail": str(detail)[:300], "by": by},
            )
        )
        return str(detail)

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
                data={"by": by, "note": note[:300]},
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
            if probed is not None and probed.status is not ProbeStatus.UNKNOWN:
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
            expect=_UNSETTLED,
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
        except Exception as exc:
            log.warning("could not publish the escalation of action %s: %r", action.id, exc)
