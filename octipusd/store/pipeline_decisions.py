"""What a person's approval of a pipeline question writes on the pipeline, inside the decision's own
transaction (:meth:`~octipusd.store.approval_store.ApprovalStoreMixin.decide_approval`).

A stage or plan approval (issue 28 item 4, seed 003 "Approvals inside a pipeline") lists the
pipeline's gate commands in its input (``gateCommands``: ``[{"nodeKey", "command"}]``). Approving it
stores them on the pipeline as ``metadata.approvedGateCommands``::

    [{"nodeKey", "command", "approvalId", "decidedBy", "decidedAt", "generation"}]

``generation`` is the pipeline's walk generation when the person approved: a resume starts a new
one, so what was approved for a walk never carries over to the next (the allowance ends when the
pipeline stops running; :mod:`octipusd.pipelines.gate_commands`). Entries of an older walk are
dropped when a new approval is stored, and all of them, with the approved calls, when the pipeline
is completed, failed or stopped (:meth:`~octipusd.store.Store.set_pipeline_status`).

Only an approval the daemon asked for a pipeline counts: tool :data:`PIPELINE_TOOL_ID`, no run,
kind :data:`STAGE_APPROVAL_KIND`, of the pipeline's own session. A tool call's approval whose
arguments happen to look like one writes nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import Session as DbSession

from octipusd.store.codec import dump_object, load_object
from octipusd.store.models import ApprovalRow, RunRow
from octipusd.store.pipeline_records import (
    APPROVED_CALLS_KEY,
    APPROVED_GATE_COMMANDS_KEY,
    BLOCKED_CALL_KEY,
    PIPELINE_CALL_KIND,
    PIPELINE_TOOL_ID,
    STAGE_APPROVAL_KIND,
    PipelineStatus,
)
from octipusd.store.pipeline_store import lock_pipeline

__all__ = ["record_approved_call", "record_approved_gate_commands"]

#: Statuses in which an approved blocked call becomes an allowance (a stopped, failed or completed
#: pipeline's approval is recorded, and allows nothing).
_ALLOWING = frozenset({PipelineStatus.RUNNING, PipelineStatus.AWAITING_APPROVAL, PipelineStatus.PAUSED})


def _listed(raw: object) -> list[tuple[str, str]]:
    """The ``(nodeKey, command)`` pairs of an approval's ``gateCommands`` (malformed ones left out)."""
    pairs: list[tuple[str, str]] = []
    for entry in raw if isinstance(raw, list) else ():
        if isinstance(entry, dict):
            node, command = entry.get("nodeKey"), entry.get("command")
            if isinstance(node, str) and isinstance(command, str) and command:
                pairs.append((node, command))
    return pairs


def record_approved_gate_commands(
    db: DbSession, approval: ApprovalRow, decided_by: str, now: datetime
) -> None:
    """Inside an approval's decision (approved): store the gate commands a stage or plan approval
    listed on its pipeline (see the module); any other approval writes nothing.

    Raises:
        NotFoundError: The pipeline is gone (the decision's transaction is rolled back).
    """
    if approval.tool_id != PIPELINE_TOOL_ID or approval.run_id is not None:
        return
    asked = load_object(approval.input)
    pipeline_id = asked.get("pipelineId")
    listed = _listed(asked.get("gateCommands"))
    if asked.get("kind") != STAGE_APPROVAL_KIND or not isinstance(pipeline_id, str) or not listed:
        return
    row = lock_pipeline(db, pipeline_id)
    if row.session_id != approval.session_id:
        return
    metadata = load_object(row.metadata_)
    kept: list[dict[str, Any]] = [
        e
        for e in metadata.get(APPROVED_GATE_COMMANDS_KEY) or ()
        if isinstance(e, dict)
        and e.get("generation") == row.generation
        and (e.get("nodeKey"), e.get("command")) not in listed
    ]
    kept += [
        {
            "nodeKey": node,
            "command": command,
            "approvalId": approval.id,
            "decidedBy": decided_by,
            "decidedAt": now.isoformat(),
            "generation": row.generation,
        }
        for node, command in dict.fromkeys(listed)
    ]
    metadata[APPROVED_GATE_COMMANDS_KEY] = kept
    row.metadata_ = dump_object(metadata, "metadata")
    row.updated_at = now
    db.add(row)


def record_approved_call(db: DbSession, approval: ApprovalRow, decided_by: str, now: datetime) -> None:
    """Inside an approval's decision (approved) of kind ``pipeline_call``: the stage worker's blocked
    call its pipeline raised again becomes an allowance (``metadata.approvedCalls``, issue 28 item 2),
    with who decided and when; its draft (``metadata.blockedCall``) is consumed. Nothing when the
    draft is another approval's, or the pipeline left ``running``, ``awaiting_approval`` and
    ``paused`` (a restart's); any other approval writes nothing.

    Raises:
        NotFoundError: The pipeline is gone (the decision's transaction is rolled back).
    """
    if approval.kind != PIPELINE_CALL_KIND or approval.run_id is None:
        return
    run = db.get(RunRow, approval.run_id)
    if run is None or run.pipeline_id is None:
        return
    row = lock_pipeline(db, run.pipeline_id)
    metadata = load_object(row.metadata_)
    blocked = metadata.get(BLOCKED_CALL_KEY)
    if not isinstance(blocked, dict) or blocked.get("approvalId") != approval.id:
        return
    del metadata[BLOCKED_CALL_KEY]
    if PipelineStatus(row.status) in _ALLOWING:
        allowance = {**blocked, "decidedBy": decided_by, "decidedAt": now.isoformat()}
        metadata[APPROVED_CALLS_KEY] = [*(metadata.get(APPROVED_CALLS_KEY) or []), allowance]
    row.metadata_ = dump_object(metadata, "metadata")
    row.updated_at = now
    db.add(row)
