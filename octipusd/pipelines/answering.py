"""``answer_pipeline_approval({id})``: the coordinator asks the person in the conversation (issue 28
item 3; seed 003 "Approvals inside a pipeline").

The pipeline's pending approval (its ``pendingApproval``: a stage worker's blocked call, a "continue
the stage" question, a question of the walk) is forwarded to the person: announced on the calling
root run (``approval_requested``: the conversation's clients show it, the push notification fires).
The person decides it where they decide any approval (the conversation, ``octipusctl approvals``, the
page, the phone); this tool never decides for them. It waits up to
:attr:`AnswerLimits.wait_s` (five minutes) for that explicit answer: a decision answers the command,
the request id, who decided and when; a timeout or an unavailable answer answers ``decided: false``
and leaves the approval pending (it never manufactures a denial). The decision reaches the walk as
any answer does (the runner listens to the broker), so approving after a restart resumes the paused
stage too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from octipusd.errors import ConflictError
from octipusd.store.aio import in_thread
from octipusd.store.pipeline_records import Pipeline
from octipusd.store.records import Approval, ApprovalStatus
from octipusd.store.repository import Store

__all__ = ["AnswerLimits", "ApprovalAnswers", "approval_event"]

#: ``emit(run_id, kind, data)``: store and publish one run event.
Emit = Callable[[str, str, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class AnswerLimits:
    """The limits of waiting for a person's answer, each in its unit.

    Attributes:
        wait_s: Seconds ``answer_pipeline_approval`` waits for the person's explicit answer (seed 003:
            five minutes).
        poll_s: Seconds between two reads of the approval while waiting (an answer this daemon's
            broker did not see, e.g. written by another process, is still noticed).
    """

    wait_s: float = 300.0
    poll_s: float = 5.0


class ApprovalAnswers:
    """Forwards a pipeline's pending approval and waits for the person's answer (see the module).

    Args:
        store: The store.
        limits: The waiting limits.
    """

    def __init__(self, store: Store, limits: AnswerLimits | None = None) -> None:
        self.store = store
        self.limits = limits or AnswerLimits()
        #: Announces the forwarded approval on the caller's run (wired by the composition root).
        self.announce: Emit | None = None
        self._waits: dict[str, anyio.Event] = {}

    def on_decided(self, approval: Approval) -> None:
        """The broker's listener: an approval was answered; its waiters wake."""
        event = self._waits.get(approval.id)
        if event is not None:
            event.set()

    async def answer(
        self, pipeline: Pipeline, run_id: str | None, *, attended: bool = True
    ) -> dict[str, Any]:
        """Forward ``pipeline``'s pending approval to the person of ``run_id``'s conversation and
        wait for their answer (bounded by :attr:`AnswerLimits.wait_s`; not at all for an unattended
        caller, a schedule's or a monitor's turn: nobody is there to answer, the person is notified).

        Returns:
            ``{"id", "requestId", "decided", "decision", "status", "command", "toolName",
            "decidedBy", "decidedAt", "pipelineStatus"}``; ``decided`` False (``decision`` None) when
            no explicit answer came in time: the approval stays pending.

        Raises:
            ConflictError: The pipeline has no pending approval.
            StoreError: The database failed.
        """
        found = pipeline.metadata.get("pendingApproval")
        pending: dict[str, Any] = found if isinstance(found, dict) else {}
        request = pending.get("requestId")
        if not isinstance(request, str):
            raise ConflictError(
                f"pipeline {pipeline.id} has no pending approval (it is {pipeline.status.value}); "
                "get_pipeline_status shows pendingApproval when it waits for one"
            )
        approval = await in_thread(self.store.get_approval, request)
        if approval.status is ApprovalStatus.PENDING:
            await self._forward(approval, run_id, pending)
            if attended:
                approval = await self._wait(approval)
        current = await in_thread(self.store.get_pipeline, pipeline.id)
        return _answered(approval, current)

    async def _forward(self, approval: Approval, run_id: str | None, pending: dict[str, Any]) -> None:
        """Show the approval in the caller's conversation (its run's ``approval_requested``)."""
        if self.announce is None or run_id is None:
            return
        where = {"id": pending.get("pipelineId"), "stage": pending.get("stage")}
        await self.announce(run_id, "approval_requested", approval_event(approval) | {"pipeline": where})

    async def _wait(self, approval: Approval) -> Approval:
        """The approval once answered, or as it is after :attr:`AnswerLimits.wait_s`."""
        event = self._waits.setdefault(approval.id, anyio.Event())
        try:
            with anyio.move_on_after(self.limits.wait_s):
                while approval.status is ApprovalStatus.PENDING:
                    with anyio.move_on_after(self.limits.poll_s):
                        await event.wait()
                    approval = await in_thread(self.store.get_approval, approval.id)
        finally:
            self._waits.pop(approval.id, None)
        return approval


def approval_event(approval: Approval) -> dict[str, Any]:
    """The data of the ``approval_requested`` run event announcing ``approval`` (as the gate's)."""
    return {
        "approval_id": approval.id,
        "tool_id": approval.tool_id,
        "kind": approval.kind,
        "subject": approval.subject,
        "reason": approval.reason,
        "explanation": approval.explanation,
        "expires_at": approval.expires_at.isoformat() if approval.expires_at else None,
    }


def _answered(approval: Approval, pipeline: Pipeline) -> dict[str, Any]:
    decided = approval.status in (ApprovalStatus.APPROVED, ApprovalStatus.DENIED)
    document: dict[str, Any] = {
        "id": pipeline.id,
        "requestId": approval.id,
        "decided": decided,
        "decision": ("approve" if approval.status is ApprovalStatus.APPROVED else "deny")
        if decided
        else None,
        "status": approval.status.value,
        "command": approval.subject,
        "toolName": approval.tool_id,
        "decidedBy": approval.decided_by if decided else None,
        "decidedAt": approval.decided_at.isoformat() if decided and approval.decided_at else None,
        "pipelineStatus": pipeline.status.value,
    }
    if not decided:
        document["message"] = (
            "no explicit answer yet; the approval stays pending and the person can still answer it "
            f"(octipusctl approvals approve {approval.id}, or deny)"
            if approval.status is ApprovalStatus.PENDING
            else f"the approval is {approval.status.value}: nobody can answer it any more"
        )
    return document
