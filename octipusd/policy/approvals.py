"""Approvals as durable records, and waiting for a person's answer.

An approval is written to the store (status ``pending``) before anyone is asked, so it is
visible to every client and survives a restart (a restart cancels the approvals of runs that
were live, see ``Store.interrupt_orphaned_runs``). An answer is applied exactly once: the store
decides with a conditional update, so a second answer, or an answer racing the expiry, loses
cleanly with :class:`~octipusd.errors.ApprovalError`.

A managed run waits at most ``daemon.approvalTimeoutSeconds`` (5 minutes, seed 003
"Approvals inside a pipeline"); expiry never allows.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio

from octipusd.errors import ApprovalError
from octipusd.store.aio import in_thread
from octipusd.store.records import Approval, ApprovalStatus
from octipusd.store.repository import Store


class Outcome(enum.StrEnum):
    """How a wait for an approval ended."""

    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class ApprovalResult:
    """The end of a wait.

    Attributes:
        outcome: approved, denied, expired or cancelled.
        approval: The approval record as finally stored.
    """

    outcome: Outcome
    approval: Approval

    @property
    def approved(self) -> bool:
        """True only for an explicit approval."""
        return self.outcome is Outcome.APPROVED


@dataclass(frozen=True)
class Recheck:
    """What the rules said when they were checked again after an approval (seed 003: a
    permission revoked while the prompt was open cannot be granted by it).

    Attributes:
        allowed: Whether the approved call may go on.
        reason: Why (the rule that denies it, when it may not).
    """

    allowed: bool
    reason: str


@dataclass(frozen=True)
class Decided:
    """A person's answer as applied, and, for an approval, what its re-check said.

    Attributes:
        approval: The approval as stored after the answer.
        recheck: The re-check of the approved call, or None (a denial, an approval nobody in this
            daemon waits on, or no report within the wait).
    """

    approval: Approval
    recheck: Recheck | None = None


@dataclass
class _Pending:
    """A re-check the answering caller waits for."""

    done: anyio.Event
    result: Recheck | None = None


class ApprovalBroker:
    """Creates approvals, waits for answers with a deadline, applies answers exactly once.

    Args:
        store: The store holding approval records.
        timeout_seconds: Longest wait of a managed run for one answer (seconds).
    """

    def __init__(self, store: Store, timeout_seconds: float) -> None:
        self._store = store
        self.timeout_seconds = timeout_seconds
        self._waiters: dict[str, anyio.Event] = {}
        #: The run of each waiter's approval (None: of no run), to wake a run's waiters from memory.
        self._runs: dict[str, str | None] = {}
        self._listeners: list[Callable[[Approval], None]] = []
        self._rechecks: dict[str, _Pending] = {}

    def add_listener(self, listener: Callable[[Approval], None]) -> None:
        """Call ``listener(approval)`` after every committed answer (e.g. to signal the
        approved-action recovery with the affected scope, seed 001). It must not block."""
        self._listeners.append(listener)

    async def create(
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
        kind: str = "tool",
        questions: dict[str, Any] | None = None,
        action_ids: list[str] | None = None,
        invocation: tuple[str, str] | None = None,
    ) -> Approval:
        """Store a pending approval (committed before return) and register its waiter.

        ``kind`` is ``tool``, ``questionnaire`` (then ``questions`` holds what people are
        shown: every question, option label and description), ``action_recovery`` (then
        ``action_ids`` are the journal records it covers) or ``pipeline_replay``. ``run_id`` is
        None for a request that belongs to no run; ``invocation`` (id, decision claim) names the
        undecided hand-started call that waits for it, linked in the same transaction
        (:meth:`~octipusd.store.Store.create_approval`).

        Returns:
            The pending approval, whose ``expires_at`` is now + ``timeout_seconds``.
        """
        expires = datetime.now(UTC) + timedelta(seconds=self.timeout_seconds)
        approval = await in_thread(
            self._store.create_approval,
            run_id=run_id,
            session_id=session_id,
            tool_id=tool_id,
            subject=subject,
            reason=reason,
            input=input,
            explanation=explanation,
            vendor_request_id=vendor_request_id,
            expires_at=expires,
            kind=kind,
            questions=questions,
            action_ids=action_ids or (),
            invocation=invocation,
        )
        self._waiters[approval.id] = anyio.Event()
        self._runs[approval.id] = approval.run_id
        return approval

    async def wait(self, approval: Approval) -> ApprovalResult:
        """Wait for an answer to ``approval`` for at most ``timeout_seconds``.

        On expiry the approval is marked ``expired`` (unless an answer won the race, which
        is then honoured). Cancellation of the caller marks it ``cancelled``.

        Returns:
            The outcome and the final record. Never raises for an expiry.
        """
        event = self._waiters.setdefault(approval.id, anyio.Event())
        self._runs[approval.id] = approval.run_id
        try:
            with anyio.move_on_after(self.timeout_seconds):
                await event.wait()
            with anyio.CancelScope(shield=True):
                if not event.is_set():
                    await in_thread(
                        self._store.resolve_approval_if_pending,
                        approval.id,
                        status=ApprovalStatus.EXPIRED,
                        reason=f"no answer within {self.timeout_seconds:g} s",
                    )
                final = await in_thread(self._store.get_approval, approval.id)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await in_thread(
                    self._store.resolve_approval_if_pending,
                    approval.id,
                    status=ApprovalStatus.CANCELLED,
                    reason="the run ended before an answer",
                )
            raise
        finally:
            self._waiters.pop(approval.id, None)
            self._runs.pop(approval.id, None)
        return self._result(final)

    async def answer(
        self,
        approval_id: str,
        *,
        approve: bool,
        decided_by: str,
        reason: str | None = None,
        answers: dict[str, Any] | None = None,
        grant: dict[str, Any] | None = None,
    ) -> Approval:
        """Apply a person's answer exactly once and wake the waiting run.

        Args:
            approval_id: The approval.
            approve: Allow (or submit a questionnaire) vs deny (or cancel it).
            decided_by: Who answers.
            reason: Optional reason shown to the model with a denial.
            answers: A questionnaire's validated answers (question text -> answer).
            grant: A scoped grant to create with the answer ("remember"), as keyword
                arguments of :meth:`~octipusd.store.Store.create_grant`.

        Raises:
            NotFoundError: no such approval.
            ApprovalError: it was already answered, expired or cancelled.
        """
        decided = await self.decide(
            approval_id,
            approve=approve,
            decided_by=decided_by,
            reason=reason,
            answers=answers,
            grant=grant,
        )
        return decided.approval

    async def decide(
        self,
        approval_id: str,
        *,
        approve: bool,
        decided_by: str,
        reason: str | None = None,
        answers: dict[str, Any] | None = None,
        grant: dict[str, Any] | None = None,
        recheck_seconds: float = 0.0,
    ) -> Decided:
        """Like :meth:`answer`; approving a call also waits (up to ``recheck_seconds``) for the
        rules' re-check of that call, so the person is told when the call is denied after all (a
        rule or grant changed while the prompt was open). A run's call is re-checked by the gate
        when its wait returns, a hand-started call when it is dispatched (the answer signals its
        dispatch); both report through :meth:`report_recheck`.

        Raises:
            NotFoundError: no such approval.
            ApprovalError: it was already answered, expired or cancelled.
        """
        # registered before the answer can wake the waiting run, so its report cannot come first
        pending = _Pending(anyio.Event()) if approve and recheck_seconds > 0 else None
        if pending is not None:
            self._rechecks[approval_id] = pending
        try:
            approval = await in_thread(
                self._store.decide_approval,
                approval_id,
                approve=approve,
                decided_by=decided_by,
                reason=reason,
                answers=answers,
                grant=grant,
            )
            self._wake(approval)
            if pending is None:
                return Decided(approval)
            with anyio.move_on_after(recheck_seconds):
                await pending.done.wait()
            return Decided(approval, pending.result)
        finally:
            if pending is not None:
                self._rechecks.pop(approval_id, None)

    def report_recheck(self, approval_id: str, *, allowed: bool, reason: str) -> None:
        """The gate re-checked the call ``approval_id`` approved: tell the person's answer."""
        pending = self._rechecks.get(approval_id)
        if pending is not None:
            pending.result = Recheck(allowed, reason)
            pending.done.set()

    def _wake(self, approval: Approval) -> None:
        """An answer was stored: wake the waiting run, tell the listeners."""
        waiter = self._waiters.get(approval.id)
        if waiter is not None:
            waiter.set()
        for listener in self._listeners:
            try:
                listener(approval)
            except Exception:  # a listener never undoes a committed answer
                logging.getLogger("octipusd.policy").exception("approval listener failed")

    async def cancel_run(self, run_id: str, reason: str) -> int:
        """Cancel every pending approval of a run and wake its waiters; returns how many.

        One store transaction (no read first): the waits open when it began are woken from memory
        once it committed.
        """
        waiting = self.waits_of(run_id)
        count = await in_thread(self._store.cancel_pending_approvals, run_id, reason=reason)
        for event in waiting:
            event.set()
        return count

    def waits_of(self, run_id: str) -> list[anyio.Event]:
        """The open waits on approvals of ``run_id``, to set once the store resolved those approvals
        (e.g. :meth:`~octipusd.store.Store.finish_run` with ``approvals_reason``): a wait registered
        now is on an approval already committed, so a transaction starting after this call sees it.
        A wait woken while its approval is still pending fails (:class:`ApprovalError`)."""
        return [
            self._waiters[a] for a, of_run in self._runs.items() if of_run == run_id and a in self._waiters
        ]

    @staticmethod
    def _result(approval: Approval) -> ApprovalResult:
        status = ApprovalStatus(approval.status)
        if status is ApprovalStatus.APPROVED:
            return ApprovalResult(Outcome.APPROVED, approval)
        if status is ApprovalStatus.DENIED:
            return ApprovalResult(Outcome.DENIED, approval)
        if status is ApprovalStatus.EXPIRED:
            return ApprovalResult(Outcome.EXPIRED, approval)
        if status is ApprovalStatus.CANCELLED:
            return ApprovalResult(Outcome.CANCELLED, approval)
        raise ApprovalError(f"approval {approval.id} is still {status} after its wait ended")
