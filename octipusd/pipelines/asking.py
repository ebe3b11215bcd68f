"""A pipeline asks a person: retries ran out, or a ``human_input`` stage (issue 27 item 2).

The question is an approval (:mod:`octipusd.policy.approvals`) of tool ``octipus:pipeline``
belonging to the pipeline's session and no run: the person answers it where they answer any
approval (``octipusctl approvals``, the page). It does not expire (the walk waits for the person,
durably); the pipeline is ``awaiting_approval`` with ``metadata.pendingApproval`` describing it
(``requestId``, ``stage``, ``node``, ``itemId``, ``itemTitle``, ``reason``, ``fields``). The answer
reaches the workflow as a message (the runner listens to the broker's answers); approving a
question whose retries ran out accepts the work as it is and goes on, declining it fails the
pipeline (resumable: its resume runs the stage again with fresh retries).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from octipusd.errors import ConflictError
from octipusd.pipelines.status import pending_approval
from octipusd.store.aio import in_thread
from octipusd.store.pipeline_records import (
    BLOCKED_CALL_KEY,
    PENDING_APPROVAL_KEY,
    PIPELINE_TOOL_ID,
    MetadataPatch,
    NodeStatus,
    Pipeline,
    PipelineStatus,
)
from octipusd.store.records import Approval
from octipusd.store.repository import Store

__all__ = ["PENDING_KEY", "PIPELINE_TOOL_ID", "AskedNotice", "Questions"]

#: Told each approval a pipeline asks with no run of its own, as it is asked (the push notification:
#: :meth:`~octipusd.notify.Notifier.pipeline_approval`); it must not block.
AskedNotice = Callable[[Pipeline, Approval], None]

#: The ``metadata`` key describing the open question (the status document's ``pendingApproval``).
PENDING_KEY = PENDING_APPROVAL_KEY
#: Statuses an approval puts back to ``running`` (a restart pauses a pipeline awaiting a person).
_WAITING = (PipelineStatus.AWAITING_APPROVAL, PipelineStatus.PAUSED)


class Questions:
    """The walk's steps around a person's answer (each run as a durable step).

    Args:
        store: The store.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        #: Told each question asked (the push notification; wired by the composition root), or None.
        self.notice: AskedNotice | None = None

    async def ask(self, pipeline_id: str, node: str, item_id: str | None, question: Mapping[str, Any]) -> str:
        """Step: store the approval and make the pipeline ``awaiting_approval``.

        Args:
            question: ``stage``, ``reason`` (what is asked) and ``fields`` (a human stage's fields);
                optionally ``kind`` (``pendingApproval``'s; default ``question``), ``explanation``
                (what approving and denying do) and ``input`` (more for the approval's input only,
                e.g. a stage approval's ``gateCommands``).

        Returns:
            The approval's id.

        Raises:
            StoreError: The database failed.
        """
        pipeline = await in_thread(self.store.get_pipeline, pipeline_id)
        title = await self.item_title(pipeline_id, item_id)
        details = {
            "pipelineId": pipeline_id,
            "pipeline": pipeline.name,
            "stage": question.get("stage"),
            "node": node,
            "itemId": item_id,
            "itemTitle": title,
            "reason": question.get("reason"),
            "fields": question.get("fields") or [],
        }
        kind = str(question.get("kind") or "question")
        where = f" (item {title!r})" if title else ""
        explanation = (
            question.get("explanation") or "approve to go on, deny to stop the pipeline (failed, resumable)"
        )
        approval = await in_thread(
            lambda: self.store.create_approval(
                run_id=None,
                session_id=pipeline.session_id,
                tool_id=PIPELINE_TOOL_ID,
                subject=f"pipeline {pipeline.name}: stage {question.get('stage')}{where}",
                reason=str(question.get("reason") or ""),
                input={**details, "kind": kind, **dict(question.get("input") or {})},
                explanation=str(explanation),
                vendor_request_id=None,
                expires_at=None,
            )
        )
        stage = question.get("stage")
        pending = pending_approval(
            approval, stage=stage if isinstance(stage, str) else None, item=item_id, kind=kind
        )
        await self.wait_for_person(pipeline_id, node, {**details, **pending})
        if self.notice is not None:
            self.notice(pipeline, approval)
        return approval.id

    async def item_title(self, pipeline_id: str, item_id: str | None) -> str | None:
        """The plan item's title, or None."""
        if item_id is None:
            return None
        items = await in_thread(self.store.list_pipeline_items, pipeline_id)
        return next((i.title for i in items if i.id == item_id), None)

    async def again(self, pipeline_id: str, node: str) -> None:
        """Step: a resume came while the question is open (a restart paused the pipeline): the
        pipeline waits for the person again."""
        pipeline = await in_thread(self.store.get_pipeline, pipeline_id)
        pending = pipeline.metadata.get(PENDING_KEY)
        if isinstance(pending, dict):
            await self.wait_for_person(pipeline_id, node, pending)

    async def wait_for_person(
        self, pipeline_id: str, node: str, pending: dict[str, Any], more: Mapping[str, Any] | None = None
    ) -> None:
        """The pipeline awaits the person (``pending`` its ``pendingApproval``, ``more`` other
        metadata written with it), if it is still ``running``: one stopped (or failed by the
        watchdog) meanwhile keeps its status, and the open question is kept for its resume. Only
        those keys are written (a decision's keys written meanwhile stay)."""
        metadata = MetadataPatch(put={**(more or {}), PENDING_KEY: pending})
        # the node first: whoever sees the pipeline awaiting the person sees its node awaiting too
        await in_thread(self.store.set_pipeline_node, pipeline_id, node, NodeStatus.AWAITING_APPROVAL)
        try:
            await in_thread(
                lambda: self.store.set_pipeline_status(
                    pipeline_id,
                    PipelineStatus.AWAITING_APPROVAL,
                    expect=[PipelineStatus.RUNNING],
                    event={"requestId": pending.get("requestId"), "reason": pending.get("reason")},
                    metadata=metadata,
                    summary=f"waiting for a person: {pending.get('reason')}",
                )
            )
        except ConflictError:
            await in_thread(lambda: self.store.update_pipeline(pipeline_id, metadata=metadata))

    async def answered(
        self, pipeline_id: str, node: str, item_id: str | None, answer: Mapping[str, Any]
    ) -> None:
        """Step: record the person's answer (a ``decision`` event with the item), clear the open
        question; an approval puts the pipeline back to ``running``, its node ``approved``."""
        approved = bool(answer.get("approved"))
        metadata = MetadataPatch.dropping(PENDING_KEY, BLOCKED_CALL_KEY)
        data = {
            "requestId": answer.get("approvalId"),
            "approved": approved,
            "by": answer.get("by"),
            "reason": answer.get("reason"),
            "node": node,
        }
        await in_thread(
            lambda: self.store.append_pipeline_event(pipeline_id, "decision", data, item_id=item_id)
        )
        await in_thread(lambda: self.store.update_pipeline(pipeline_id, metadata=metadata))
        if not approved:
            return
        await in_thread(self.store.set_pipeline_node, pipeline_id, node, NodeStatus.APPROVED)
        with contextlib.suppress(ConflictError):  # stopped meanwhile: the next boundary parks the walk
            await in_thread(
                lambda: self.store.set_pipeline_status(
                    pipeline_id, PipelineStatus.RUNNING, expect=_WAITING, summary=None
                )
            )
