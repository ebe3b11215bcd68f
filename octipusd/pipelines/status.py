"""The status document of a pipeline (``get_pipeline_status``, ``GET /v1/pipelines/{id}``, the page, the TUI).

Seed 003: stage results and remaining items; each item's stages with their results, retry reasons
and decisions; the durable ``history`` (each event with its item and attempt identity, or none: an
old event's provenance is never guessed); ``incompleteAttempt`` (the text so far of the attempt a
resume continues, never the stage's output). Built from one consistent store read
(:class:`~octipusd.store.pipeline_store.PipelineSnapshot`); pure. Keys are camelCase like the tools'.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from octipusd.store.pipeline_records import (
    DECISION_EVENT_KINDS,
    AttemptStatus,
    ItemStatus,
    Pipeline,
    PipelineAttempt,
    PipelineEvent,
    PipelineItem,
    PipelineNode,
)
from octipusd.store.pipeline_store import PipelineSnapshot
from octipusd.store.records import Approval

__all__ = ["pending_approval", "pipeline_summary", "status_document"]


def _at(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def pipeline_summary(pipeline: Pipeline) -> dict[str, Any]:
    """The fields of a pipeline a list shows (``GET /v1/pipelines``, ``octipusctl pipelines list``)."""
    return {
        "id": pipeline.id,
        "name": pipeline.name,
        "status": pipeline.status.value,
        "summary": pipeline.summary,
        "error": pipeline.error,
        "sessionId": pipeline.session_id,
        "workspace": pipeline.workspace,
        "user": pipeline.user,
        "generation": pipeline.generation,
        "currentNode": pipeline.current_node,
        "currentItemId": pipeline.current_item_id,
        "tokensUsed": pipeline.tokens_used,
        "createdAt": _at(pipeline.created_at),
        "updatedAt": _at(pipeline.updated_at),
        "endedAt": _at(pipeline.ended_at),
    }


def pending_approval(approval: Approval, *, stage: str | None, item: str | None, kind: str) -> dict[str, Any]:
    """The status document's ``pendingApproval`` for an approval a pipeline waits on (issue 28).

    Args:
        approval: The approval (its id, tool, subject and reason are shown).
        stage: The stage's name.
        item: The plan item's id, or None.
        kind: ``tool_call`` (a blocked call raised again), ``continue_stage``, ``stage_approval``
            (a stage or plan approval, listing the gate commands in its reason) or ``pipeline_replay``.

    Returns:
        ``{"requestId", "stage", "item", "toolName", "subject", "reason", "kind"}``.
    """
    return {
        "requestId": approval.id,
        "stage": stage,
        "item": item,
        "toolName": approval.tool_id,
        "subject": approval.subject,
        "reason": approval.reason,
        "kind": kind,
    }


def _attempt(attempt: PipelineAttempt) -> dict[str, Any]:
    return {
        "id": attempt.id,
        "node": attempt.node_key,
        "stage": attempt.stage,
        "itemId": attempt.item_id,
        "number": attempt.number,
        "status": attempt.status.value,
        "startReason": attempt.start_reason,
        "retryReason": attempt.retry_reason,
        "result": attempt.result,
        "error": attempt.error,
        "runIds": attempt.run_ids,
        "counters": attempt.counters,
        "tokens": attempt.tokens,
        "startedAt": _at(attempt.started_at),
        "endedAt": _at(attempt.ended_at),
    }


def _event(event: PipelineEvent) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "kind": event.kind,
        "itemId": event.item_id,
        "attemptId": event.attempt_id,
        "data": event.data,
        "at": _at(event.created_at),
    }


def _node(node: PipelineNode, names: dict[str, str]) -> dict[str, Any]:
    return {
        "node": node.key,
        "kind": node.kind,
        "name": names.get(node.key, node.key),
        "status": node.status.value,
        "traversals": node.traversals,
        "retries": node.retries,
        "output": node.output,
        "error": node.error,
    }


def _item(
    item: PipelineItem, attempts: list[PipelineAttempt], decisions: list[PipelineEvent]
) -> dict[str, Any]:
    stages: dict[str, list[PipelineAttempt]] = defaultdict(list)
    for attempt in attempts:
        stages[attempt.stage].append(attempt)
    return {
        "id": item.id,
        "ordinal": item.ordinal,
        "title": item.title,
        "detail": item.detail,
        "acceptance": item.acceptance,
        "status": item.status.value,
        "result": item.result,
        "error": item.error,
        "evidence": item.evidence,
        "createdByNodeKey": item.created_by_node_key,
        "createdByUserId": item.created_by_user,
        "stages": [
            {
                "stage": stage,
                "node": tries[-1].node_key,
                "status": tries[-1].status.value,
                "result": tries[-1].result,
                "retryReasons": [t.retry_reason for t in tries if t.retry_reason],
                "attempts": [_attempt(t) for t in tries],
            }
            for stage, tries in stages.items()
        ],
        "decisions": [_event(d) for d in decisions],
    }


def _node_names(pipeline: Pipeline) -> dict[str, str]:
    """Node key -> a readable name (the step's name, or the foreach body's names joined)."""
    names: dict[str, str] = {}
    nodes = pipeline.graph.get("nodes")
    for node in nodes if isinstance(nodes, list) else ():
        if isinstance(node, dict) and isinstance(node.get("key"), str):
            names[node["key"]] = str(node.get("name") or node["key"])
    return names


def status_document(snapshot: PipelineSnapshot, *, include_history: bool = True) -> dict[str, Any]:
    """The status document of one pipeline (see the module); ``history`` only when asked for."""
    pipeline = snapshot.pipeline
    by_item: dict[str | None, list[PipelineAttempt]] = defaultdict(list)
    for attempt in snapshot.attempts:
        by_item[attempt.item_id].append(attempt)
    decisions: dict[str | None, list[PipelineEvent]] = defaultdict(list)
    for event in snapshot.events:
        if event.kind in DECISION_EVENT_KINDS:  # a skip names its items in its data
            skipped = event.data.get("skipped") if event.item_id is None else None
            for item_id in skipped if isinstance(skipped, list) else [event.item_id]:
                decisions[item_id].append(event)
    incomplete = next(
        (
            a
            for a in reversed(snapshot.attempts)
            if a.incomplete_text and a.status is not AttemptStatus.SUCCEEDED
        ),
        None,
    )
    names = _node_names(pipeline)
    document = {
        **pipeline_summary(pipeline),
        "params": pipeline.params,
        "plan": pipeline.plan,
        "stages": [_node(n, names) for n in snapshot.nodes],
        "items": [_item(i, by_item.get(i.id, []), decisions.get(i.id, [])) for i in snapshot.items],
        "remainingItems": [
            i.id
            for i in snapshot.items
            if i.status in (ItemStatus.PENDING, ItemStatus.RUNNING, ItemStatus.FAILED)
        ],
        "attempts": [_attempt(a) for a in snapshot.attempts],
        "incompleteAttempt": (
            {
                "id": incomplete.id,
                "node": incomplete.node_key,
                "stage": incomplete.stage,
                "itemId": incomplete.item_id,
                "number": incomplete.number,
                "status": incomplete.status.value,
                "text": incomplete.incomplete_text,
            }
            if incomplete is not None
            else None
        ),
        "pendingChanges": pipeline.pending_changes,
        "pendingApproval": pipeline.metadata.get("pendingApproval"),
    }
    if include_history:
        document["history"] = [_event(e) for e in snapshot.events]
    return document
