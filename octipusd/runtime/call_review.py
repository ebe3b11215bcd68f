"""The recovery review of calls a person starts by hand (seed 000 "What the user sees", issue 26).

Before a hand-started mutation is dispatched, :meth:`CallReview.clear` reads the user's and
session's unresolved journal records (probing those whose tool declares a probe): when any is
left, a recovery review (approval kind ``action_recovery``, no run) covering exactly that batch
is asked, and the invocation waits for it (its approval moves it back to ``approved``). A
person can also review a session's batch without a pending call (:meth:`CallReview.review`).

A reviewed record whose dispatched request may still land (its in-flight bound has not passed
and Octipus did not end its transport) is the narrower gap: a repeat started at once would land
beside it. So a review asked for a call without an idempotency key says until when
(``waits_until`` in its input, and its note), and :meth:`CallReview.waits_for_landing` holds the
approved repeat back until then, unless the person approved it with run now (the approval's
``answers`` hold :data:`~octipusd.journal.review.RUN_NOW`). The wait is recomputed from the
journal at every dispatch, so it survives a restart, and it ends early once the earlier request's
transport was ended. A call with an idempotency key never waits: a repeat with the same key is
refused while the earlier request may land (:func:`~octipusd.journal.retry.duplicate_refusal`).
"""

from __future__ import annotations

import logging

from octipusd.errors import ConflictError
from octipusd.journal.executor import ActionJournal
from octipusd.journal.operator import RecoveryOperator, in_flight_time
from octipusd.journal.retry import idempotency_key_of
from octipusd.journal.review import (
    REVIEW_BATCH,
    REVIEW_NOTE,
    RUN_NOW,
    describe_actions,
    landing_until,
    wait_note,
)
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.rules import subject_of
from octipusd.runtime.recovery import RecoveryWorker
from octipusd.store.aio import in_thread
from octipusd.store.invocation_store import ToolInvocation
from octipusd.store.journal_store import ToolAction
from octipusd.store.records import Approval
from octipusd.store.repository import Store

__all__ = ["CallReview"]

log = logging.getLogger("octipusd.runtime.actions")


class CallReview:
    """The recovery review gate of hand-started calls (see the module docstring).

    Args:
        store: The store.
        journal: The execution boundary (its live set separates running records from orphans).
        operator: Probes uncertain actions; its contract lookup says whether a tool declares an
            idempotency key (without connecting to it).
        broker: Approvals.
        worker: The recovery worker (expires unanswered reviews, dispatches a waiting call again).
    """

    def __init__(
        self,
        store: Store,
        journal: ActionJournal,
        operator: RecoveryOperator,
        broker: ApprovalBroker,
        worker: RecoveryWorker,
    ) -> None:
        self.store = store
        self.journal = journal
        self.operator = operator
        self.broker = broker
        self.worker = worker

    async def _blocking(self, user: str, session_id: str) -> list[ToolAction]:
        live = set(self.journal.live)
        return await in_thread(
            lambda: self.store.blocking_actions(
                user=user, session_id=session_id, live=live, limit=REVIEW_BATCH
            )
        )

    async def clear(self, invocation: ToolInvocation, token: str) -> bool:
        """The review gate of a claimed hand-started mutation: True when no earlier action of the
        user and session is unresolved (after probing them); otherwise a review is asked and the
        invocation, handed back under its exact claim ``token``, waits for it (False)."""
        blocking = await self._blocking(invocation.user, invocation.session_id)
        for action in blocking:
            await self.operator.probe(action)
        if blocking:
            blocking = await self._blocking(invocation.user, invocation.session_id)
        if not blocking:
            return True
        now = self.store.now()
        until = None if self.keyed(invocation) else landing_until(blocking, now)
        approval = await self.broker.create(
            run_id=None,
            session_id=invocation.session_id,
            tool_id=invocation.tool,
            subject="Check earlier",
            reason="action_recovery · retry: earlier actions of this session have uncertain effects",
            input={
                "proposed": {"tool": invocation.tool, "subject": subject_of(invocation.arguments or {}, "")},
                "actions": describe_actions(blocking, now),
                "note": REVIEW_NOTE
                if until is None
                else f"{REVIEW_NOTE} {wait_note(invocation.tool, until)}",
                "waits_until": in_flight_time(until) if until is not None else None,
            },
            explanation=f"{len(blocking)} earlier action(s) have uncertain effects",
            vendor_request_id=None,
            kind="action_recovery",
            action_ids=[a.id for a in blocking],
        )
        requeued = await in_thread(
            self.store.requeue_invocation_for_review, invocation.id, token, approval.id
        )
        self.worker.signal_deadline()
        if not requeued:
            await in_thread(
                self.store.resolve_approval_if_pending,
                approval.id,
                status="cancelled",
                reason="the invocation changed meanwhile",
            )
        return False

    async def waits_for_landing(self, invocation: ToolInvocation, token: str) -> bool:
        """Hand an approved repeat back while a request of an action its review covered may still
        land; True when it waits (see the module docstring).

        Waiting, its claim ``token`` is released (the invocation stays ``approved`` and its
        ``error`` says until when) and the worker dispatches it again at that time.

        Raises:
            StoreError: the store failed (the caller releases the claim and retries later).
        """
        if invocation.approval_id is None or self.keyed(invocation):
            return False
        approval = await in_thread(self.store.get_approval, invocation.approval_id)
        if approval.kind != "action_recovery" or (approval.answers or {}).get(RUN_NOW):
            return False
        covered = await in_thread(
            lambda: self.store.list_actions(ids=list(approval.action_ids), limit=REVIEW_BATCH)
        )
        until = landing_until(covered, self.store.now())
        if until is None:
            return False
        when = in_flight_time(until)
        reason = (
            f"waits until {when}: a request of an action its recovery review covered may still land until "
            f"then, and this call could repeat it; it runs then unless cancelled "
            f"(`octipusctl actions cancel {invocation.id}`)"
        )
        if await in_thread(lambda: self.store.release_invocation_claim(invocation.id, token, reason=reason)):
            log.info("invocation %s waits until %s before it runs", invocation.id, when)
            self.worker.retry_at(invocation.user, until)
        return True

    def keyed(self, invocation: ToolInvocation) -> bool:
        """The call declares an idempotency key (its tool's current contract, read without
        connecting to it)."""
        contract = self.operator.contracts(invocation.tool)
        return idempotency_key_of(invocation.tool, contract, invocation.arguments or {}) is not None

    async def review(
        self, *, user: str, session_id: str, approve: bool, decided_by: str, reason: str | None
    ) -> Approval:
        """A person reviews the session's next batch of unresolved actions without a pending call.

        Creates a recovery review (kind ``action_recovery``, no run) covering up to 20 records
        and decides it at once. Approving acknowledges them (their outcome is unchanged);
        denying records the refusal and keeps them unresolved.

        Raises:
            NotFoundError: no such session.
            ConflictError: nothing is unresolved there.
        """
        session = await in_thread(self.store.get_session, session_id)
        batch = await self._blocking(user, session.id)
        if not batch:
            raise ConflictError(f"session {session.id} has no unresolved actions of {user}")
        approval = await self.broker.create(
            run_id=None,
            session_id=session.id,
            tool_id="action_recovery",
            subject="Check earlier",
            reason="action_recovery · review of uncertain actions",
            input={"actions": describe_actions(batch, self.store.now()), "note": REVIEW_NOTE},
            explanation=f"{len(batch)} action(s) with uncertain effects",
            vendor_request_id=None,
            kind="action_recovery",
            action_ids=[a.id for a in batch],
        )
        return await self.broker.answer(approval.id, approve=approve, decided_by=decided_by, reason=reason)
