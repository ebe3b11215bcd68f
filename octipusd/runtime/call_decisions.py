"""The decision of a call a person started by hand, and of one a stopped daemon left undecided (seed 001).

A hand-started call (:class:`~octipusd.runtime.actions.ActionService`) is recorded
``awaiting_approval`` with no approval *before* it is decided, under the exact decision claim
(token, daemon) of the request that recorded it: a retry of the same request id finds it and
decides (spends) nothing. :class:`CallDecisions` then decides it with the permission rules and
writes the decision only while that claim holds:

* DENY ends it ``denied`` with the reason (and a journal ``not_executed`` record);
* ASK stores an approval (kind ``tool``, no run) linked to it in the same transaction;
* ALLOW moves it to ``approved`` (owed an execution); an ALLOW resting on a scoped grant counts
  the grant's use in that same transaction, so a daemon that stops in between leaves neither.

A daemon can die after recording a call and before deciding it (while a grant's use is being
counted, say). At start-up, :meth:`CallDecisions.recover_undecided` settles every such call the
way every other recorded, not-started request is settled: it takes the call's decision claim
exactly (a conditional ``UPDATE``: of two recoverers, or a recoverer and a cancellation, one
wins) and decides it again under the current policy (a fresh approval where the policy asks, a
denial with its reason, or a run). A retry of its request id then gets that answer instead of a
call left undecided for ever. (Deleting a session deletes its invocations with it.)
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable

import anyio

from octipusd.errors import ConflictError
from octipusd.journal.executor import ActionJournal, ActionScope
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import PolicyDecision
from octipusd.policy.gate import PermissionGate
from octipusd.policy.rules import Level, subject_of
from octipusd.runtime.recovery import RecoveryWorker
from octipusd.store.aio import in_thread
from octipusd.store.invocation_store import ToolInvocation
from octipusd.store.repository import Store
from octipusd.toolkit import UNDECLARED_CONTRACT, Origin

__all__ = ["CallDecisions", "manual_scope", "record_refusal"]

log = logging.getLogger("octipusd.runtime.actions")


def manual_scope(invocation: ToolInvocation, token: str | None = None) -> ActionScope:
    """The journal scope of a hand-started call (bound to its dispatch claim ``token``, if given)."""
    return ActionScope(
        user=invocation.user,
        session_id=invocation.session_id,
        run_id=None,
        agent=f"manual:{invocation.user}",
        origin=Origin.MANUAL,
        invocation=(invocation.id, token) if token is not None else None,
    )


async def record_refusal(journal: ActionJournal, invocation: ToolInvocation, reason: str) -> None:
    """Record in the journal that a hand-started call was refused before it ran (``not_executed``)."""
    await journal.refused(
        manual_scope(invocation), invocation.tool, invocation.arguments or {}, UNDECLARED_CONTRACT, reason
    )


def _denial(decision: PolicyDecision) -> str:
    return f"denied by Octipus policy: {decision.explanation}"


class CallDecisions:
    """Decides recorded, undecided hand-started calls (see the module docstring).

    Args:
        store: The store.
        gate: The permission gate (rules read fresh on every decision, grants spent).
        broker: Approvals.
        journal: The execution boundary (a refusal is recorded there).
        owner: This daemon instance's id (decision claims carry it).
        worker: The recovery worker (an allowed call decided again at start-up is handed to it;
            it expires unanswered approvals).
        dispatch: Claims and runs one approved invocation now (the action service's).
    """

    def __init__(
        self,
        *,
        store: Store,
        gate: PermissionGate,
        broker: ApprovalBroker,
        journal: ActionJournal,
        owner: str,
        worker: RecoveryWorker,
        dispatch: Callable[[str], Awaitable[bool]],
    ) -> None:
        self.store = store
        self.gate = gate
        self.broker = broker
        self.journal = journal
        self.owner = owner
        self.worker = worker
        self.dispatch = dispatch

    async def decide(
        self, invocation: ToolInvocation, workspace: str, token: str, *, again: bool = False
    ) -> None:
        """Decide a recorded, undecided invocation under its exact decision claim ``token``: refuse
        it, ask for an approval, or let it run.

        Only the holder of the claim decides it (its request, or the start-up recovery of a daemon
        that stopped before deciding), and the decision is written only while the claim holds: an
        invocation cancelled meanwhile stays cancelled. An ALLOW resting on a grant spends one use
        of it, exactly as an agent's call does
        (:meth:`LivePolicy.decide_and_spend <octipusd.policy.live.LivePolicy.decide_and_spend>`),
        counted in the transaction that records the decision. An allowed call runs now, or, when
        decided ``again`` at start-up, is handed to the recovery worker.

        Raises:
            StoreError: the rules could not be read or a write failed; an invocation that could not
                be decided is cancelled (best effort), so it never waits undecided.
        """
        try:
            decision = await self._record(invocation, workspace, token, again=again)
        except ConflictError:
            return  # cancelled, or taken over, before its decision was recorded
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._withdraw(invocation)
            raise
        if decision.level is Level.DENY:
            await record_refusal(self.journal, invocation, _denial(decision))
        elif decision.level is Level.ALLOW:
            if again:
                self.worker.signal_user(invocation.user)
            else:
                await self.dispatch(invocation.id)

    async def _record(
        self, invocation: ToolInvocation, workspace: str, token: str, *, again: bool
    ) -> PolicyDecision:
        """Take the rules' decision and record it under ``token`` (see :meth:`decide`).

        Raises:
            ConflictError: the claim no longer holds (nothing was recorded or spent).
            StoreError: the rules could not be read or a write failed.
        """
        args = invocation.arguments or {}

        async def approve_with_use(grant_id: str) -> bool:  # the use and the decision commit together
            return await in_thread(
                lambda: self.store.settle_invocation(
                    invocation.id, "approved", token=token, grant_id=grant_id
                )
            )

        decision = await self.gate.live.decide_and_spend(
            invocation.tool,
            args,
            action=None,
            session_id=invocation.session_id,
            workspace=workspace,
            use=approve_with_use,
        )
        if decision.level is Level.ASK:
            reason = f"started by hand by {invocation.user}"
            if again:
                reason += "; decided again after octipusd restarted (the stopped daemon had not decided it)"
            await self.broker.create(
                run_id=None,
                session_id=invocation.session_id,
                tool_id=invocation.tool,
                subject=subject_of(args, "") or None,
                reason=reason,
                input=args,
                explanation=decision.explanation,
                vendor_request_id=None,
                invocation=(invocation.id, token),
            )
            self.worker.signal_deadline()  # nobody waits on it: the worker expires it in time
        elif decision.level is not Level.ALLOW:
            await in_thread(
                lambda: self.store.settle_invocation(
                    invocation.id, "denied", token=token, reason=_denial(decision)
                )
            )
        elif decision.grant_id is None:  # an ALLOW on a grant was recorded with the grant's use
            await in_thread(lambda: self.store.settle_invocation(invocation.id, "approved", token=token))
        return decision

    async def _withdraw(self, invocation: ToolInvocation) -> None:
        """Cancel an invocation whose decision failed (logged with its traceback if that fails too)."""
        try:
            await in_thread(
                lambda: self.store.cancel_invocation(
                    invocation.id, by="octipusd (the call could not be decided)"
                )
            )
        except Exception:
            log.exception("invocation %s could not be decided and could not be cancelled", invocation.id)

    async def recover_undecided(self) -> int:
        """Decide again the calls a stopped daemon recorded but never decided (start-up, seed 001).

        Each is claimed exactly and decided under the current policy as its request would have
        been (see the module docstring).

        Returns:
            How many undecided invocations were found.

        Raises:
            StoreError: the store failed (the worker tries again later); an invocation whose
                decision failed after its claim is cancelled with the reason, as at submission.
        """
        left = await in_thread(lambda: self.store.undecided_invocations(owner=self.owner))
        for invocation in left:
            # read before the claim: a failure after it would leave the call claimed by this daemon,
            # which its later passes skip
            session = await in_thread(self.store.get_session, invocation.session_id)
            token = uuid.uuid4().hex
            claim = functools.partial(
                self.store.claim_undecided, invocation.id, token=token, owner=self.owner
            )
            if not await in_thread(claim):
                continue  # cancelled, or another recoverer decides it
            log.warning(
                "invocation %s (%s) was recorded but not decided when the previous octipusd stopped: "
                "deciding it again under the current policy",
                invocation.id,
                invocation.tool,
            )
            await self.decide(invocation, session.workspace, token, again=True)
        return len(left)
