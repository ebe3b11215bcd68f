"""The pipeline replay review hook (seed 000 "Pipeline resume and rewind").

Resuming or rewinding a pipeline reruns work from a checkpoint, so tools that returned
successfully before can be called again. Before the pipeline runner changes recovery
checkpoints or starts workers for a pipeline with previous execution, it calls
:meth:`ReplayReviews.review`, which asks a person to approve "Review pipeline replay"
(approval kind ``pipeline_replay``) covering the pipeline's prior action records. The prompt
always warns that missing records do not prove that nothing happened (older runs and
vendor-native CLI tools leave none). A pipeline paused before any stage ran needs no review.
Rejecting the replay leaves the checkpoints as they are (the caller changes nothing);
unattended work cannot approve its own replay. While one request awaits review, a concurrent
resume of the same pipeline is refused, so a second walker never starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from octipusd.errors import ConflictError
from octipusd.policy.approvals import ApprovalBroker
from octipusd.store.aio import in_thread
from octipusd.store.repository import Store

__all__ = ["MISSING_RECORDS_WARNING", "ReplayDecision", "ReplayReviews"]

#: Shown with every replay review (seed 000).
MISSING_RECORDS_WARNING = (
    "Missing action records do not establish that no action happened: older runs and vendor-native "
    "CLI tools leave no per-action records, so work they did may be repeated."
)
#: Most action ids listed on one replay review (the count is always shown in full).
_LISTED = 200
#: Most recorded actions of one pipeline read to count what a replay can repeat.
REPLAY_ACTIONS_LIMIT = 100_000


@dataclass(frozen=True)
class ReplayDecision:
    """The answer to a replay request.

    Attributes:
        allowed: The caller may change checkpoints and start workers.
        reason: Why (who approved, who denied, why it was not asked).
        approval_id: The review asked, if one was.
        action_count: How many prior action records the review covered.
    """

    allowed: bool
    reason: str
    approval_id: str | None = None
    action_count: int = 0


class ReplayReviews:
    """Asks for pipeline replay reviews, one at a time per pipeline.

    Args:
        store: The store (the pipeline's action records).
        broker: Creates the approval and waits for the answer.
    """

    def __init__(self, store: Store, broker: ApprovalBroker) -> None:
        self.store = store
        self.broker = broker
        self._pending: set[str] = set()

    async def review(
        self,
        *,
        pipeline_id: str,
        session_id: str,
        user: str,
        attended: bool,
        has_previous_execution: bool,
        operation: str = "resume",
    ) -> ReplayDecision:
        """Ask before a pipeline's resume or rewind reruns work.

        Args:
            pipeline_id: The pipeline.
            session_id: Its Octipus session (the approval's scope).
            user: Who asks.
            attended: False for unattended work (it cannot approve its own replay).
            has_previous_execution: False when no stage ever ran (no review needed).
            operation: ``resume`` or ``rewind`` (shown to the reviewer).

        Returns:
            The :class:`ReplayDecision`.

        Raises:
            ConflictError: another resume of this pipeline is awaiting its review.
        """
        if not has_previous_execution:
            return ReplayDecision(True, "no stage ran before: nothing can be replayed")
        if pipeline_id in self._pending:
            raise ConflictError(
                f"pipeline {pipeline_id} already has a {operation} awaiting its replay review; "
                "answer that review instead of starting another"
            )
        self._pending.add(pipeline_id)
        try:
            actions = await in_thread(
                lambda: self.store.list_actions(pipeline_id=pipeline_id, limit=REPLAY_ACTIONS_LIMIT)
            )
            listed = [
                {
                    "action_id": a.id,
                    "tool": a.tool,
                    "outcome": a.outcome,
                    "started_at": a.started_at.isoformat(),
                }
                for a in actions[:_LISTED]
            ]
            if not attended:
                return ReplayDecision(
                    False,
                    f"review required: replaying pipeline {pipeline_id} can repeat {len(actions)} recorded "
                    f"action(s) and unrecorded work; a person must approve it, and this work is unattended",
                    action_count=len(actions),
                )
            approval = await self.broker.create(
                run_id=None,
                session_id=session_id,
                tool_id=f"pipeline:{pipeline_id}",
                subject="Review pipeline replay",
                reason=f"pipeline {operation} reruns work from a checkpoint (requested by {user})",
                input={
                    "pipeline_id": pipeline_id,
                    "operation": operation,
                    "action_count": len(actions),
                    "actions": listed,
                    "warning": MISSING_RECORDS_WARNING,
                },
                explanation=(
                    f"{len(actions)} prior action record(s) of this pipeline may run again. {MISSING_RECORDS_WARNING}"
                ),
                vendor_request_id=None,
                kind="pipeline_replay",
                action_ids=[a.id for a in actions],
            )
            result = await self.broker.wait(approval)
            who = result.approval.decided_by or "octipusd"
            if result.approved:
                return ReplayDecision(True, f"replay approved by {who}", approval.id, len(actions))
            return ReplayDecision(
                False,
                f"replay {result.outcome.value} by {who}; the checkpoints are unchanged",
                approval.id,
                len(actions),
            )
        finally:
            self._pending.discard(pipeline_id)
