"""The pipeline replay review (seed 000 "Pipeline resume and rewind", FACTS.md §6 Replay).

Resuming or rewinding a pipeline reruns work from a checkpoint, so tools that returned successfully
before can be called again. When the pipeline has previous execution (a stage attempt started, or an
action recorded under it), the runner asks a person to approve "Review pipeline replay" (approval
kind ``pipeline_replay``) before it changes a checkpoint or starts a worker; a pipeline paused before
any stage ran needs none. The review covers the pipeline's prior action records (the journal's
records of its stage runs, listed on the approval) and always warns that missing records do not prove
that nothing happened (older runs and vendor-native CLI tools leave none).

The review is durable, like a pipeline's question (:mod:`octipusd.pipelines.asking`): the approval
belongs to the pipeline's session and no run and does not expire; the pipeline is
``awaiting_approval`` with ``metadata.pendingApproval`` (kind ``pipeline_replay``) and the request
kept under :data:`~octipusd.store.pipeline_records.REPLAY_REVIEW_KEY`. A restart leaves it so (no
walk was at work): the person answers it after the restart like before it. The answer reaches the
runner through the approval broker's listener:

* approved: the runner claims the walk (only from ``awaiting_approval``: a stop meanwhile wins) and
  resumes or rewinds as asked;
* denied (or cancelled): the pipeline goes back to its status before, with the checkpoints, the
  workflow and the items as they were; no worker starts.

While one request awaits review, another resume is refused ("already awaiting"), so a second walker
never starts; a stop cancels the review. Unattended work cannot approve its own replay: its resume
is refused with the reason, and nothing changes.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Any, Final

from octipusd.errors import ConflictError, ForbiddenError
from octipusd.pipelines.asking import AskedNotice
from octipusd.pipelines.status import pending_approval
from octipusd.store.aio import in_thread
from octipusd.store.pipeline_records import (
    PENDING_APPROVAL_KEY,
    REPLAY_REVIEW_KEY,
    MetadataPatch,
    Pipeline,
    PipelineStatus,
)
from octipusd.store.records import Approval, ApprovalStatus
from octipusd.store.repository import Store
from octipusd.toolkit.pipelines import PipelineCaller, ResumeRequest

__all__ = [
    "MISSING_RECORDS_WARNING",
    "REPLAY_KIND",
    "REPLAY_SUBJECT",
    "REVIEW_KEYS",
    "WITHOUT_REVIEW",
    "ReplayRequest",
    "ReplayReviews",
    "already_awaiting",
    "without_review",
]

#: The approval kind of a replay review.
REPLAY_KIND = "pipeline_replay"
#: The approval's subject (seed 000).
REPLAY_SUBJECT = "Review pipeline replay"
#: The review's ``metadata`` keys (the request and its ``pendingApproval``) and the patch removing them.
REVIEW_KEYS: Final = (REPLAY_REVIEW_KEY, PENDING_APPROVAL_KEY)
WITHOUT_REVIEW: Final = MetadataPatch.dropping(*REVIEW_KEYS)
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
class ReplayRequest:
    """A resume or rewind awaiting its review (kept in the pipeline's metadata).

    Attributes:
        approval_id: The review's approval.
        operation: ``resume`` or ``rewind`` (``fromStage`` given).
        request: The resume as asked (``fromStage``, ``skipItems``, ``evidence``).
        previous: The pipeline's status before the review (a denial puts it back).
        user: Who asked.
    """

    approval_id: str
    operation: str
    request: ResumeRequest
    previous: PipelineStatus
    user: str

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return {
            "approvalId": self.approval_id,
            "operation": self.operation,
            "fromStage": self.request.from_stage,
            "skipItems": list(self.request.skip_items),
            "evidence": self.request.evidence,
            "previousStatus": self.previous.value,
            "user": self.user,
        }

    def restored(self, pipeline: Pipeline) -> Pipeline:
        """``pipeline`` as it was before the review (its status; its metadata without the review)."""
        return dataclasses.replace(pipeline, status=self.previous, metadata=without_review(pipeline.metadata))

    @classmethod
    def of(cls, pipeline: Pipeline) -> ReplayRequest | None:
        """The request ``pipeline`` keeps, or None."""
        raw = pipeline.metadata.get(REPLAY_REVIEW_KEY)
        if not isinstance(raw, dict):
            return None
        return cls(
            approval_id=str(raw.get("approvalId") or ""),
            operation=str(raw.get("operation") or "resume"),
            request=ResumeRequest(
                from_stage=raw.get("fromStage"),
                skip_items=tuple(raw.get("skipItems") or ()),
                evidence=raw.get("evidence"),
            ),
            previous=PipelineStatus(raw.get("previousStatus") or PipelineStatus.PAUSED.value),
            user=str(raw.get("user") or ""),
        )


def without_review(metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` without the replay review's keys (the request and its ``pendingApproval``)."""
    return WITHOUT_REVIEW.applied(metadata)


def already_awaiting(pipeline: Pipeline) -> ConflictError | None:
    """The refusal of a resume while ``pipeline`` awaits a replay review, or None."""
    replay = ReplayRequest.of(pipeline) if pipeline.awaiting_replay_review else None
    if replay is None:
        return None
    return ConflictError(
        f"pipeline {pipeline.id} is already awaiting its replay review (approval {replay.approval_id}); "
        f"approve or deny that review (octipusctl approvals approve|deny {replay.approval_id}) "
        "instead of resuming it again"
    )


class ReplayReviews:
    """Asks for pipeline replay reviews and applies their answers (see the module).

    Args:
        store: The store (the pipeline, its action records, the approval).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        #: Told each review asked (the push notification; wired by the composition root), or None.
        self.notice: AskedNotice | None = None

    async def needed(self, pipeline: Pipeline) -> bool:
        """Whether resuming ``pipeline`` can replay work: a stage attempt started, or an action
        was recorded under it (a pipeline paused before any stage ran needs no review)."""
        snapshot = await in_thread(lambda: self.store.pipeline_snapshot(pipeline.id, history=False))
        if snapshot.attempts:
            return True
        return bool(await in_thread(lambda: self.store.list_actions(pipeline_id=pipeline.id, limit=1)))

    async def ask(self, pipeline: Pipeline, request: ResumeRequest, caller: PipelineCaller) -> dict[str, Any]:
        """Ask for the review of a resume (or rewind) of ``pipeline``: store the approval, then make
        the pipeline ``awaiting_approval`` with the request, in that order (a pipeline never awaits a
        review that does not exist); nothing else changes.

        Returns:
            The ``pendingApproval`` it awaits (``requestId``: the approval's id).

        Raises:
            ForbiddenError: ``caller`` is unattended (nothing written).
            ConflictError: Another resume got there first (it awaits its review: "already awaiting";
                or it claimed the walk); the approval just stored is cancelled.
            StoreError: The database failed.
        """
        operation = "rewind" if request.from_stage else "resume"
        actions = await in_thread(
            lambda: self.store.list_actions(pipeline_id=pipeline.id, limit=REPLAY_ACTIONS_LIMIT)
        )
        if not caller.attended:
            raise ForbiddenError(
                f"review required: a {operation} of pipeline {pipeline.id} can repeat {len(actions)} recorded "
                "action(s) and unrecorded work, so a person must approve its replay review, and this run "
                "is unattended; resume it from an attended session or with octipusctl pipelines resume"
            )
        approval = await in_thread(lambda: self._create(pipeline, operation, caller.user, actions))
        replay = ReplayRequest(approval.id, operation, request, pipeline.status, caller.user)
        pending = pending_approval(approval, stage=request.from_stage, item=None, kind=REPLAY_KIND)
        metadata = MetadataPatch(put={PENDING_APPROVAL_KEY: pending, REPLAY_REVIEW_KEY: replay.to_json()})
        try:
            await in_thread(
                lambda: self.store.set_pipeline_status(
                    pipeline.id,
                    PipelineStatus.AWAITING_APPROVAL,
                    expect=[pipeline.status],
                    generation=pipeline.generation,
                    event={"requestId": approval.id, "reason": "replay review", "operation": operation},
                    metadata=metadata,
                    summary=f"waiting for a person: {REPLAY_SUBJECT} before the {operation}",
                )
            )
        except ConflictError as exc:
            await self._cancel_approval(approval.id, "another resume of the pipeline came first")
            current = await in_thread(self.store.get_pipeline, pipeline.id)
            raise already_awaiting(current) or exc from exc
        if self.notice is not None:
            self.notice(pipeline, approval)
        return pending

    def _create(self, pipeline: Pipeline, operation: str, user: str, actions: list[Any]) -> Approval:
        """The review's approval (blocking): the pipeline's session, no run, no expiry."""
        listed = [
            {"action_id": a.id, "tool": a.tool, "outcome": a.outcome, "started_at": a.started_at.isoformat()}
            for a in actions[:_LISTED]
        ]
        return self.store.create_approval(
            run_id=None,
            session_id=pipeline.session_id,
            tool_id=f"pipeline:{pipeline.id}",
            subject=REPLAY_SUBJECT,
            reason=f"pipeline {pipeline.name}: a {operation} reruns work from a checkpoint (asked by {user})",
            input={
                "pipelineId": pipeline.id,
                "pipeline": pipeline.name,
                "operation": operation,
                "action_count": len(actions),
                "actions": listed,
                "warning": MISSING_RECORDS_WARNING,
            },
            explanation=(
                f"{len(actions)} prior action record(s) of this pipeline may run again. {MISSING_RECORDS_WARNING} "
                "Deny to keep the pipeline as it is."
            ),
            vendor_request_id=None,
            expires_at=None,
            kind=REPLAY_KIND,
            action_ids=[a.id for a in actions],
        )

    async def answered(self, approval: Approval) -> ReplayRequest | None:
        """Apply a person's answer to a replay review.

        Returns:
            The request to carry out when it was approved and the pipeline still awaits this review
            (the caller claims the walk); None otherwise: a denial (or cancellation) put the
            pipeline back to its status before, checkpoints untouched; a stale answer changed nothing.

        Raises:
            StoreError: The database failed.
        """
        pipeline_id = str(approval.input.get("pipelineId") or "")
        pipeline = await in_thread(self.store.get_pipeline, pipeline_id)
        replay = ReplayRequest.of(pipeline)
        if replay is None or replay.approval_id != approval.id or not pipeline.awaiting_replay_review:
            return None
        if approval.status is ApprovalStatus.APPROVED:
            return replay
        who = approval.decided_by or "octipusd"
        summary = f"replay {approval.status.value} by {who}; the checkpoints are unchanged"
        with contextlib.suppress(ConflictError):  # stopped meanwhile: the stop cleared the review
            await in_thread(
                lambda: self.store.set_pipeline_status(
                    pipeline_id,
                    replay.previous,
                    expect=[PipelineStatus.AWAITING_APPROVAL],
                    event={
                        "requestId": approval.id,
                        "reason": "replay review",
                        "decision": approval.status.value,
                    },
                    metadata=WITHOUT_REVIEW,
                    summary=summary,
                )
            )
        return None

    async def cancel(self, pipeline: Pipeline, reason: str) -> Pipeline:
        """A stop while ``pipeline`` awaited its review: the review is cancelled and its keys cleared
        (the pipeline keeps the status the stop gave it).

        Returns:
            The pipeline as it is now.

        Raises:
            StoreError: The database failed.
        """
        replay = ReplayRequest.of(pipeline)
        if replay is None:
            return pipeline
        await self._cancel_approval(replay.approval_id, reason)
        return await in_thread(lambda: self.store.update_pipeline(pipeline.id, metadata=WITHOUT_REVIEW))

    async def _cancel_approval(self, approval_id: str, reason: str) -> None:
        await in_thread(
            lambda: self.store.resolve_approval_if_pending(
                approval_id, status=ApprovalStatus.CANCELLED, reason=reason
            )
        )
