"""The pipeline's public record as the store returns it (seed 003, FACTS.md §6): frozen values.

The statuses are the seeds' names, the public interface: a pipeline is ``planning``, ``running``,
``paused``, ``awaiting_approval``, ``completed``, ``failed`` or ``stopped`` (resumable, distinct
from ``failed``); a graph node ``pending``, ``running``, ``awaiting_approval``, ``approved``,
``completed``, ``failed`` or ``skipped``; a plan item ``pending``, ``running``, ``done``, ``failed``
or ``skipped``. A stage attempt is ``running`` until it ``succeeded``, ``failed``, was ``stopped``
or ``interrupted`` (the daemon died under it; a restart pauses the pipeline, never re-runs it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

__all__ = [
    "ALLOWANCE_KEYS",
    "APPROVED_CALLS_KEY",
    "APPROVED_GATE_COMMANDS_KEY",
    "BLOCKED_CALL_KEY",
    "DECISION_EVENT_KINDS",
    "PENDING_APPROVAL_KEY",
    "PIPELINE_CALL_KIND",
    "PIPELINE_TOOL_ID",
    "REPLAY_REVIEW_KEY",
    "STAGE_APPROVAL_KIND",
    "AttemptStatus",
    "ItemStatus",
    "MetadataPatch",
    "NodeStatus",
    "Pipeline",
    "PipelineAttempt",
    "PipelineEvent",
    "PipelineItem",
    "PipelineNode",
    "PipelineStatus",
    "PipelineTemplateRecord",
]


#: History events that record a decision (a person's answer, a skip): each item of the status lists
#: its own, whether or not the whole history is read.
DECISION_EVENT_KINDS = frozenset({"decision", "human_answer", "items_skipped"})
#: The ``metadata`` key of a resume or rewind awaiting its replay review (seed 000): while it is set
#: the pipeline is not walking, only waiting for a person, so a restart leaves it as it is.
REPLAY_REVIEW_KEY = "replayReview"
#: The ``metadata`` key of the approval the pipeline waits for (the status document's ``pendingApproval``).
PENDING_APPROVAL_KEY = "pendingApproval"
#: The ``tool_id`` of the approvals a pipeline's walk asks (a person's question, no run).
PIPELINE_TOOL_ID = "octipus:pipeline"
#: The ``kind`` (in the approval's input and ``pendingApproval``) of a stage or plan approval.
STAGE_APPROVAL_KIND = "stage_approval"
#: The ``metadata`` key of the gate commands a stage or plan approval approved (issue 28 item 4).
APPROVED_GATE_COMMANDS_KEY = "approvedGateCommands"

#: The approval kind of a stage worker's blocked call raised again by its pipeline (issue 28 item 1).
PIPELINE_CALL_KIND = "pipeline_call"
#: ``metadata`` key: the calls people approved for a stage attempt (seed 003 ``metadata.approvedCalls``).
APPROVED_CALLS_KEY = "approvedCalls"
#: ``metadata`` key: the blocked call the open ``pipeline_call`` approval would allow (its allowance
#: draft; moved to :data:`APPROVED_CALLS_KEY` in the transaction that approves it).
BLOCKED_CALL_KEY = "blockedCall"
#: The ``metadata`` keys of what people approved ahead for a run (a stage attempt's approved calls, the
#: approved gate commands): the store drops them when the pipeline is ``completed``, ``failed`` or
#: ``stopped`` (seed 003: an allowance ends when the run is no longer running or awaiting approval).
ALLOWANCE_KEYS = frozenset({APPROVED_CALLS_KEY, APPROVED_GATE_COMMANDS_KEY})


@dataclass(frozen=True)
class MetadataPatch:
    """A change of some keys of a pipeline's ``metadata``: the store applies it to the row as it is,
    under the pipeline's row lock, in the transaction that writes it. So two writers that each change
    their own key (a walk's ``pendingApproval``, a decision's ``approvedCalls``) never undo each other,
    as writing back a whole dict read earlier would.

    Attributes:
        put: Keys set (replaced whole) to these values.
        drop: Keys removed (a key both dropped and put is put).
    """

    put: Mapping[str, Any] = field(default_factory=dict)
    drop: frozenset[str] = frozenset()

    @classmethod
    def dropping(cls, *keys: str) -> MetadataPatch:
        """The patch removing ``keys``."""
        return cls(drop=frozenset(keys))

    @classmethod
    def restoring(cls, before: Mapping[str, Any], keys: Collection[str]) -> MetadataPatch:
        """The patch putting ``keys`` back as they were in ``before`` (set, or removed if absent)."""
        return cls(
            put={k: before[k] for k in keys if k in before},
            drop=frozenset(k for k in keys if k not in before),
        )

    def applied(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """``metadata`` with this patch applied (a new dict)."""
        return {k: v for k, v in metadata.items() if k not in self.drop} | dict(self.put)


class PipelineStatus(StrEnum):
    """A pipeline run's status (seed 003, FACTS.md §6)."""

    PLANNING = "planning"
    RUNNING = "running"
    PAUSED = "paused"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"
    STOPPED = "stopped"

    @property
    def active(self) -> bool:
        """True while a walker may be working on it (``planning``, ``running``, ``awaiting_approval``)."""
        return self in _ACTIVE


_ACTIVE = frozenset({PipelineStatus.PLANNING, PipelineStatus.RUNNING, PipelineStatus.AWAITING_APPROVAL})


class NodeStatus(StrEnum):
    """A graph node's status within one pipeline."""

    PENDING = "pending"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"


class ItemStatus(StrEnum):
    """A plan item's status."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


class AttemptStatus(StrEnum):
    """A stage attempt's status. ``abandoned``: an unfinished attempt no resume will continue any
    more (its item was skipped, a rewind or a new attempt superseded it, the pipeline completed);
    its INCOMPLETE text is cleared."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"
    ABANDONED = "abandoned"


@dataclass(frozen=True)
class PipelineTemplateRecord:
    """A stored template: ``document`` is its export envelope (a JSON object, decoded)."""

    id: str
    name: str
    owner: str | None
    description: str | None
    document: dict[str, Any]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Pipeline:
    """One pipeline run (table ``pipelines``; JSON columns decoded).

    Attributes:
        id: 32 hex characters, the handle ``create_pipeline`` returns.
        session_id: The session whose workspace and model it works with (the owner's).
        user: The user it acts for.
        workspace: Absolute path of the session's workspace at launch.
        name: The template's name.
        template_id: The stored template's id, or the preset's name, or None (an inline template).
        template: The template document it runs (frozen at creation).
        params: Its parameter values.
        graph: The compiled graph.
        status: :class:`PipelineStatus`.
        summary: The running or final summary.
        error: Why it failed, or None.
        plan: The work plan linked at launch, or None.
        metadata: JSON state (``approvedCalls``, ...).
        pending_changes: Item edits queued for the next item boundary.
        tokens_used: Tokens its stage workers used (the pipeline pool).
        generation: How many walks it had (each resume or rewind starts one).
        workflow_id: The engine's id of its current walk, or None.
        current_node: The node it is at, or None.
        current_item_id: The plan item it is at, or None.
    """

    id: str
    session_id: str
    user: str
    workspace: str
    name: str
    template_id: str | None
    template: dict[str, Any]
    params: dict[str, Any]
    graph: dict[str, Any]
    status: PipelineStatus
    summary: str | None
    error: str | None
    plan: dict[str, Any] | None
    metadata: dict[str, Any]
    pending_changes: list[dict[str, Any]]
    tokens_used: int
    generation: int
    workflow_id: str | None
    current_node: str | None
    current_item_id: str | None
    created_at: datetime
    updated_at: datetime
    ended_at: datetime | None

    @property
    def awaiting_replay_review(self) -> bool:
        """True while a resume or rewind of it awaits its replay review (``awaiting_approval``, no walk
        at work: see :data:`REPLAY_REVIEW_KEY`)."""
        return self.status is PipelineStatus.AWAITING_APPROVAL and REPLAY_REVIEW_KEY in self.metadata


@dataclass(frozen=True)
class PipelineItem:
    """One plan item of a pipeline (FACTS.md §6, with the seed's ``acceptance``)."""

    id: str
    pipeline_id: str
    ordinal: int
    title: str
    detail: str | None
    acceptance: str | None
    status: ItemStatus
    created_by_node_key: str | None
    created_by_user: str | None
    result: str | None
    error: str | None
    evidence: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class PipelineNode:
    """One graph node's state within a pipeline."""

    pipeline_id: str
    key: str
    kind: str
    status: NodeStatus
    traversals: int
    retries: int
    output: str | None
    error: str | None
    updated_at: datetime


@dataclass(frozen=True)
class PipelineAttempt:
    """One stage attempt (its id is kept in the checkpoint; a resume continues it)."""

    id: str
    pipeline_id: str
    node_key: str
    stage: str
    item_id: str | None
    number: int
    start_reason: str
    status: AttemptStatus
    run_ids: list[str]
    incomplete_text: str | None
    result: str | None
    error: str | None
    retry_reason: str | None
    counters: dict[str, Any] | None
    tokens: int
    step_id: int | None
    generation: int
    started_at: datetime
    ended_at: datetime | None


@dataclass(frozen=True)
class PipelineEvent:
    """One durable history event (``item_id``/``attempt_id`` None: unassigned, never guessed)."""

    pipeline_id: str
    seq: int
    kind: str
    item_id: str | None
    attempt_id: str | None
    data: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
