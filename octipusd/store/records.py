"""Domain records returned by the store.

These are plain frozen dataclasses, never SQLModel instances: callers outside
:mod:`octipusd.store` must not see (or accidentally mutate) ORM objects. Every datetime is
timezone-aware UTC. JSON columns come back as ``dict`` objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any, Literal

from octipusd.toolkit.identity import StageTag
from octipusd.toolkit.plans import FeedbackStatus

__all__ = [
    "MESSAGE_ROLES",
    "Approval",
    "ApprovalStatus",
    "Checkpoint",
    "FeedbackReply",
    "FeedbackStatus",
    "ModelRow",
    "PermissionGrant",
    "PermissionRule",
    "PlanFeedback",
    "Run",
    "RunEvent",
    "RunStatus",
    "Session",
    "SessionMessage",
    "Space",
    "SpaceRole",
    "StageTag",
    "UsageTotals",
    "VendorSession",
    "WorkPlan",
]


#: Roles of a :class:`SessionMessage`.
MESSAGE_ROLES: tuple[str, ...] = ("user", "assistant")


class RunStatus(StrEnum):
    """Lifecycle of one run (one turn of a session).

    ``queued`` -> ``running`` <-> ``awaiting_approval`` -> one terminal status
    (``succeeded``, ``failed``, ``interrupted``, ``cancelled``). The first terminal status
    written wins; see :meth:`octipusd.store.Store.finish_run`.
    """

    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        """True for statuses a run never leaves (succeeded, failed, interrupted, cancelled)."""
        return self in _TERMINAL_RUN_STATUSES


_TERMINAL_RUN_STATUSES = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.INTERRUPTED, RunStatus.CANCELLED}
)


class ApprovalStatus(StrEnum):
    """State of one approval request; only ``pending`` can change, and only once."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class ModelRow:
    """A model row: a named launch configuration of one adapter (seed 003's "model").

    Attributes:
        id: 32 hex characters (uuid4).
        name: Unique name, 1-100 characters of ASCII letters, digits, ``.``, ``_`` and ``-``
            (never 32 hex characters, which would read as an id).
        adapter: Adapter registry name, e.g. ``"claude-code"``, ``"codex"``.
        binary: A command name (looked up on PATH) or an absolute path overriding the
            adapter's ``cliModels`` binary for this row; None to use that setting.
        model: Vendor model name, or None for the vendor's default.
        permission_mode: ``workspace`` (acceptEdits; the default), ``full``, ``plan`` or
            ``default``.
        additive_flags: Extra vendor flags, as normalized by the adapter when the row was
            saved (e.g. ``("--no-chrome", "--effort=high")``).
        metadata: JSON object. ``metadata["cliAgent"]`` (when present, an object) holds the
            seed's ``metadata.cliAgent.*`` settings: ``transport`` (str),
            ``inheritApiKeys`` (bool), ``sharedUse`` (bool), ``env`` (name -> str), ``passEnv``
            (list of variable names), and adapter-specific keys.
        created_at: UTC creation time.
        updated_at: UTC time of the last change.
    """

    id: str
    name: str
    adapter: str
    binary: str | None
    model: str | None
    permission_mode: str
    additive_flags: tuple[str, ...]
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime

    @property
    def cli_agent(self) -> dict[str, Any]:
        """``metadata["cliAgent"]`` as a new dict (empty when absent)."""
        value = self.metadata.get("cliAgent")
        return dict(value) if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class Session:
    """A conversation: a sequence of runs (turns) in one workspace with one adapter.

    While ``model_row_id`` is set, ``adapter``, ``model`` and ``permission_mode`` equal the
    model row's: the store copies them when the session is created and whenever the row
    changes (:meth:`~octipusd.store.Store.update_model_row`), in the same transaction. The
    row's ``binary``, ``additive_flags`` and ``metadata`` are read from the row itself.

    Attributes:
        id: 32 hex characters (uuid4).
        title: Optional human title.
        workspace: Absolute path of the working folder.
        adapter: Adapter name, e.g. ``"claude-code"``.
        model: Vendor model name, or None for the adapter's default.
        permission_mode: Permission mode name, e.g. ``"workspace"``.
        attended: False when no person can answer approvals (unattended runs cannot ask).
        created_at: UTC creation time.
        updated_at: UTC time of the last change or :meth:`~octipusd.store.Store.touch_session`.
        model_row_id: The :class:`ModelRow` the session was created from; None when it was
            created without one or the row was deleted.
        options: Per-session adapter options (JSON object, default ``{}``), merged over the
            row's ``metadata["cliAgent"]`` by the runtime (session keys win).
        flow_label: The flow guard's flags of this session, sorted and comma-separated
            (``"private,secret"``; ``""`` = none); flags are only ever added (FACTS.md §9).
        space_id: The shared space the session belongs to, or None for a personal session.
        clear_generation: How many times ``/clear`` ran on the session (0 = never). Vendor
            sessions, messages and checkpoints belong to one generation; only those of the
            current one are reused (see :meth:`~octipusd.store.Store.clear_session`).
        cleared_at: UTC time of the last ``/clear``; None when never cleared.
    """

    id: str
    title: str | None
    workspace: str
    adapter: str
    model: str | None
    permission_mode: str
    attended: bool
    created_at: datetime
    updated_at: datetime
    model_row_id: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    flow_label: str = ""
    space_id: str | None = None
    clear_generation: int = 0
    cleared_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Run:
    """One turn of a session, executed by one vendor CLI process.

    Attributes:
        id: 32 hex characters (uuid4).
        session_id: The owning session.
        turn_index: 1-based position in the session; unique per session.
        status: Current :class:`RunStatus`.
        prompt: The prompt text of this turn.
        reason: Why the run failed, was interrupted or cancelled (None otherwise).
        vendor_session_id: The vendor's conversation id used or minted by this run.
        resumed: True when the run resumed a stored vendor conversation.
        pid: Process id of the vendor CLI while it runs.
        exit_code: Exit code of the vendor CLI.
        input_tokens: Input tokens (count).
        output_tokens: Output tokens (count).
        cache_creation_input_tokens: Tokens written to the vendor's prompt cache (count).
        cache_read_input_tokens: Tokens read from the vendor's prompt cache (count).
        cost_usd: Cost in US dollars when known (exact, :mod:`octipusd.money`).
        usage_estimated: True when the vendor reported no usage and Octipus estimated it.
        result_text: Final answer text.
        owner: Instance id of the daemon that runs it.
        created_at: UTC time the run was queued.
        started_at: UTC time the vendor process started.
        ended_at: UTC time the run reached a terminal status.
        plan_mode: True when this turn ran in plan mode, overriding the row's permission mode
            for this invocation only (seed 003 "Permissions and limits").
        author: Who posted the turn (a space member's name; None = the daemon's user).
        parent_run_id: For a child agent's run, the run that spawned it (same session); None
            for a root turn.
        role: For a child agent's run, its role name; None for a root turn.
        resume_key: For a child agent's run, the resume key it was spawned with (seed 003
            "Resuming child sessions per role and task"); None when it had none.
        receipt: For a child agent's run, its receipt once it ended: its worktree (branch, head,
            diff stat, files, merge outcome), why it had none, its gate results and attempts
            (``octipusd.runtime.child_task``); None for a root turn or a child still running.
        host_services: The run's own shell commands share the host network and the Docker socket
            under the shell sandbox (seed 003 "Host services for gate commands"); never a child's.
        pipeline_id: For a pipeline stage worker's run, its pipeline; None otherwise.
        pipeline_attempt_id: For a stage worker's run, the stage attempt it works on (the same
            attempt across resumes: its vendor session is kept under the attempt).
        stage: For a stage worker's run, the stage's name.
        item_id: For a stage worker's run inside a plan loop, the plan item; None otherwise.
    """

    id: str
    session_id: str
    turn_index: int
    status: RunStatus
    prompt: str
    reason: str | None
    vendor_session_id: str | None
    resumed: bool
    pid: int | None
    exit_code: int | None
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    cost_usd: Decimal | None
    usage_estimated: bool
    result_text: str | None
    owner: str
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    plan_mode: bool = False
    author: str | None = None
    parent_run_id: str | None = None
    role: str | None = None
    resume_key: str | None = None
    receipt: dict[str, Any] | None = None
    host_services: bool = False
    pipeline_id: str | None = None
    pipeline_attempt_id: str | None = None
    stage: str | None = None
    item_id: str | None = None


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """What a set of runs used, summed in the database (every run, no page limit).

    Attributes:
        runs: Runs counted.
        input_tokens: Input tokens (count).
        output_tokens: Output tokens (count).
        cache_creation_input_tokens: Tokens written to the vendor's prompt cache (count).
        cache_read_input_tokens: Tokens read from the vendor's prompt cache (count).
        cost_usd: The sum of the costs the vendors reported (USD, exact), None when no run reported one.
        runs_without_cost: Runs whose vendor reported no cost (not in ``cost_usd``).
        estimated: Whether any run's usage was estimated by Octipus.
    """

    runs: int
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    cost_usd: Decimal | None
    runs_without_cost: int
    estimated: bool


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One persisted event of a run (text, tool use, usage, ...).

    Attributes:
        id: Database-wide increasing integer.
        run_id: The run it belongs to.
        seq: 1-based position within the run; unique per run, without gaps.
        kind: Event kind, e.g. ``"text"`` or ``"tool_use"``.
        data: The event payload (JSON object).
        created_at: UTC time it was appended.
    """

    id: int
    run_id: str
    seq: int
    kind: str
    data: dict[str, Any]
    created_at: datetime


#: Placeholder default of :attr:`VendorSession.last_used_at` ("take ``updated_at``").
_LAST_USED_FROM_UPDATED = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class VendorSession:
    """A vendor conversation id stored for reuse by a later run of a session (seed 003).

    Root conversations are stored under the adapter name (``"claude-code"``); a child task's
    under ``"<adapter>::<key>"`` (a key containing ``"::"`` is a child key).

    Attributes:
        id: Database integer id.
        session_id: The Octipus session.
        key: Reuse key, e.g. ``"claude-code"`` or ``"codex::root>coder:task-1"`` (one record
            per session and key).
        vendor_session_id: The vendor's own conversation id.
        fingerprint: Fingerprint of the launch settings the conversation was made with.
        cwd: Working folder of the vendor process (absolute path).
        clear_generation: The session's clear generation the record was saved in; a record
            of an older generation is stale and never returned for reuse.
        created_at: UTC creation time.
        updated_at: UTC time of the last save.
        cursor: Highest session message ``seq`` the vendor conversation has seen (0 = none):
            a resumed launch sends only the messages after it.
        last_used_at: UTC time of the last save; orders child records for pruning. When not
            given to the constructor it is ``updated_at``.
        checkpoint_id: The :class:`Checkpoint` a cold start carried, or None.
    """

    id: int
    session_id: str
    key: str
    vendor_session_id: str
    fingerprint: str
    cwd: str
    clear_generation: int
    created_at: datetime
    updated_at: datetime
    cursor: int = 0
    last_used_at: datetime = _LAST_USED_FROM_UPDATED
    checkpoint_id: int | None = None

    def __post_init__(self) -> None:
        if self.last_used_at is _LAST_USED_FROM_UPDATED:
            object.__setattr__(self, "last_used_at", self.updated_at)

    @property
    def is_child(self) -> bool:
        """True for a child task record (its key contains ``"::"``)."""
        return "::" in self.key


@dataclass(frozen=True, slots=True)
class SessionMessage:
    """One message of a session's transcript.

    Attributes:
        id: Database-wide increasing integer.
        session_id: The session.
        seq: 1-based position in the session; strictly increasing across every clear
            generation and never reused.
        role: ``user`` or ``assistant``.
        text: The message text.
        run_id: The run that wrote it, when known.
        adapter: The adapter that produced it (assistant messages), when known.
        clear_generation: The session's clear generation the message was written in.
        created_at: UTC time it was appended.
    """

    id: int
    session_id: str
    seq: int
    role: str
    text: str
    run_id: str | None
    adapter: str | None
    clear_generation: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A published compaction checkpoint: a summary of a contiguous prefix of the transcript.

    Attributes:
        id: Database integer id.
        session_id: The session.
        clear_generation: The clear generation whose messages it covers.
        first_seq: ``seq`` of the first message covered (inclusive).
        through_seq: ``seq`` of the last message covered (inclusive); within a generation each
            newer checkpoint covers further than the previous one.
        summary: The summary text that replaces those messages.
        covered_chars: Characters of message text the summary replaces.
        created_at: UTC time it was published.
    """

    id: int
    session_id: str
    clear_generation: int
    first_seq: int
    through_seq: int
    summary: str
    covered_chars: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Approval:
    """A request for a person (or a rule) to allow or deny one tool call.

    Attributes:
        id: 32 hex characters; the request id shown to people.
        run_id: The run that asked (None: a request of no run, e.g. a call started by hand).
        session_id: The session of that run.
        tool_id: Tool identifier, e.g. ``"cli-native:Bash"``.
        subject: The command or path concerned, when there is one.
        reason: Why the tool call needs approval.
        input: The tool call's input (JSON object).
        explanation: Which permission rule matched.
        vendor_request_id: The vendor's id for the permission request, if any.
        status: Current :class:`ApprovalStatus`.
        decided_by: Who decided (a user name, or ``"octipusd"`` for expiry/cancel).
        decision_reason: Reason given with the decision.
        created_at: UTC creation time.
        expires_at: UTC deadline after which it can no longer be approved (None: none).
        decided_at: UTC time it left ``pending``.
        kind: ``tool`` (a yes/no tool approval) or ``questionnaire`` (Claude's AskUserQuestion:
            it needs answers, seed 003).
        questions: The questionnaire (every question, option label and description), or None.
        answers: The answers given (question text -> answer), or None.
        grant_id: The scoped grant the answer created ("remember"), or None.
        action_ids: The journal records a recovery (``action_recovery``) or replay
            (``pipeline_replay``) review covers.
        decision: ``approve`` once approved, ``deny`` once denied, expired or cancelled (the call
            did not get permission); None while pending.
    """

    id: str
    run_id: str | None
    session_id: str
    tool_id: str
    subject: str | None
    reason: str | None
    input: dict[str, Any]
    explanation: str | None
    vendor_request_id: str | None
    status: ApprovalStatus
    decided_by: str | None
    decision_reason: str | None
    created_at: datetime
    expires_at: datetime | None
    decided_at: datetime | None
    kind: str = "tool"
    questions: dict[str, Any] | None = None
    answers: dict[str, Any] | None = None
    grant_id: str | None = None
    action_ids: tuple[str, ...] = ()
    decision: Literal["approve", "deny"] | None = None


@dataclass(frozen=True, slots=True)
class WorkPlan:
    """The work plan of a session (one per session).

    Attributes:
        session_id: The session.
        plan: The plan document (JSON object).
        updated_at: UTC time of the last save.
    """

    session_id: str
    plan: dict[str, Any]
    updated_at: datetime
    revision: int = 1


@dataclass(frozen=True, slots=True)
class FeedbackReply:
    """A person's answer to the agent's note on an item of plan feedback.

    Attributes:
        text: The answer.
        author: Who gave it.
        created_at: When.
        answering: The agent's note it answers (None: the agent had written none).
    """

    text: str
    author: str
    created_at: datetime
    answering: str | None


@dataclass(frozen=True, slots=True)
class PlanFeedback:
    """One item of a person's feedback on a session's work plan (seed 003 "Plans, feedback and
    delegation").

    Attributes:
        id: 32 hex characters.
        session_id: The session whose plan it is about.
        seq: Its place in the session's feedback history (1, 2, ...).
        text: What the person said.
        step_id: The plan step it is about, or None (the whole plan).
        author: Who gave it.
        plan_revision: The plan's revision it was given at.
        status: Where it stands.
        response: The agent's latest note on it, or None.
        responded_at: When the agent wrote that note.
        responded_revision: The plan revision the agent's update saved with that note.
        replies: The person's answers to the agent's notes, oldest first.
        created_at: When it was given.
        updated_at: Its last change.
    """

    id: str
    session_id: str
    seq: int
    text: str
    step_id: str | None
    author: str
    plan_revision: int
    status: FeedbackStatus
    response: str | None
    responded_at: datetime | None
    responded_revision: int | None
    replies: tuple[FeedbackReply, ...]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class PermissionRule:
    """A rule an operator added at runtime (a per-tool policy, seed 003).

    Attributes:
        id: 32 hex characters.
        level: ``allow``, ``ask`` or ``deny``.
        rule: The rule text, ``toolId(matcher)`` or a bare tool id (FACTS.md §3 syntax).
        created_by: Who added it.
        created_at: UTC time it was added.
    """

    id: str
    level: str
    rule: str
    created_by: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class PermissionGrant:
    """A scoped grant: a level for one tool id under conditions, with expiry and a usage limit.

    Attributes:
        id: 32 hex characters.
        tool_id: The tool id it covers (``cli-native:Bash``, the legacy ``cli-native``, ...).
        matcher: Rule matcher syntax (FACTS.md §3) over the call's subject; None = anything.
        level: ``allow``, ``ask`` or ``deny``.
        session_id: Condition: only this session (None: any).
        workspace: Condition: only calls in this folder or below (None: any).
        expires_at: UTC time after which it no longer applies (None: never).
        max_uses: How many calls it may allow (None: unlimited).
        uses: How many calls it allowed so far.
        revoked_at: UTC time it was revoked (None: active).
        revoked_by: Who revoked it.
        created_by: Who created it.
        created_at: UTC creation time.
        approval_id: The approval whose answer created it, if any.
        note: Free text.
    """

    id: str
    tool_id: str
    matcher: str | None
    level: str
    session_id: str | None
    workspace: str | None
    expires_at: datetime | None
    max_uses: int | None
    uses: int
    revoked_at: datetime | None
    revoked_by: str | None
    created_by: str
    created_at: datetime
    approval_id: str | None
    note: str | None


class SpaceRole(StrEnum):
    """A member's role in a shared space (FACTS.md §5)."""

    OWNER = "owner"
    EDITOR = "editor"
    COMMENTER = "commenter"
    VIEWER = "viewer"
    GUEST = "guest"


@dataclass(frozen=True, slots=True)
class Space:
    """A shared space and its members.

    Attributes:
        id: 32 hex characters.
        name: Unique name.
        created_by: Who created it (its first owner).
        created_at: UTC creation time.
        archived_at: UTC time it was archived (None: active); an archived space refuses writes.
        members: Member name -> role.
    """

    id: str
    name: str
    created_by: str
    created_at: datetime
    archived_at: datetime | None
    members: dict[str, SpaceRole]
