"""SQLModel tables of the Octipus store.

This module (with the rest of :mod:`octipusd.store`) is the only place SQLModel appears.
The tables here and ``migrations/versions`` must describe the same schema; a test compares
the migrated database with :data:`sqlmodel.SQLModel.metadata`.

JSON columns are stored as text (``json.dumps``) and decoded by the repository. Datetimes
are stored as UTC (``timestamptz`` on PostgreSQL, naive UTC text on SQLite) and always
come back timezone-aware. Free-form strings are ``TEXT`` (no length limit that PostgreSQL
would enforce and SQLite would not); generated ids are ``VARCHAR(32)``.

``models`` holds the model rows (named launch configurations: adapter, binary, vendor
model, permission mode, additive flags, metadata). ``sessions.model_row_id`` refers to it;
the foreign key has no ``ON DELETE`` action: :meth:`octipusd.store.Store.delete_model_row`
detaches the sessions itself (``SET NULL`` semantics, after copying the row's values onto
them) in the transaction that deletes the row.

``runs.session_id`` and ``run_events.run_id`` have no index of their own: the unique keys
``(session_id, turn_index)`` and ``(run_id, seq)`` lead with them and serve those lookups.

Session reuse (seed 003, ``reuse_store.py``): ``sessions.clear_generation`` counts ``/clear``;
``vendor_sessions`` holds one vendor conversation per session and key (root keys like
``"claude-code"``, child task keys ``"<adapter>::<key>"``) with the generation it was saved in,
its acknowledged transcript cursor and the checkpoint a cold start carried;
``session_messages`` is the session's transcript (``seq`` per session, never reused) and
``session_checkpoints`` the published compaction summaries. ``session_messages.session_id`` and
``session_checkpoints.session_id`` are served by the unique keys that lead with them.

Amounts of money are exact: ``runs.cost_nano_usd`` holds whole nano-dollars (:class:`UsdNanos`; the
attribute ``RunRow.cost_usd`` is the :class:`~decimal.Decimal` amount, see :mod:`octipusd.money`).

``vault_entries`` holds the vault's credentials (seed 003): the value only as a Fernet token
(``ciphertext``; the key never enters the database), the users and tools allowed (JSON lists).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlmodel import Field, SQLModel

from octipusd.errors import InvalidRequestError
from octipusd.money import from_nanos, to_nanos

__all__ = [
    "NAMING_CONVENTION",
    "ActionReceiptRow",
    "ApprovalRow",
    "ModelRowRow",
    "MonitorRow",
    "PermissionGrantRow",
    "PermissionRuleRow",
    "PipelineAttemptRow",
    "PipelineEventRow",
    "PipelineItemRow",
    "PipelineNodeRow",
    "PipelineRow",
    "PipelineTemplateRow",
    "PlanFeedbackRow",
    "RunEventRow",
    "RunRow",
    "SessionCheckpointRow",
    "SessionMessageRow",
    "SessionRow",
    "SpaceMemberRow",
    "SpaceRow",
    "ToolActionRow",
    "ToolInvocationRow",
    "UTCDateTime",
    "UsdNanos",
    "VaultEntryRow",
    "VendorSessionRow",
    "WorkPlanRow",
]

#: Constraint and index names; the migrations spell out the names this produces.
NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
SQLModel.metadata.naming_convention = NAMING_CONVENTION

_ID = sa.String(32)
#: Integer primary keys of append-heavy tables: 64-bit on PostgreSQL, SQLite's rowid on SQLite.
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A datetime column that always holds UTC and always returns an aware datetime.

    Naive datetimes given to it are taken as UTC. On SQLite (no time zone support) the value
    is stored as naive UTC; on PostgreSQL as ``timestamptz``.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Normalise to UTC before writing."""
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Return an aware UTC datetime."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class UsdNanos(sa.types.TypeDecorator[Decimal]):
    """An amount in US dollars (:class:`~decimal.Decimal`) stored as whole nano-dollars (``BIGINT``).

    Integers are summed exactly by SQLite and PostgreSQL alike (``SUM`` over this column comes back
    as an amount too). Amounts are rounded to the nano-dollar on the way in (:func:`~octipusd.money.to_nanos`;
    :func:`~octipusd.money.usd` already did where a vendor's figure was read).
    """

    impl = sa.BigInteger()
    cache_ok = True

    def process_bind_param(self, value: Decimal | None, dialect: Dialect) -> int | None:
        """Dollars to nano-dollars.

        Raises:
            InvalidRequestError: ``value`` is not a :class:`~decimal.Decimal` (a binary float
                is refused, not rounded silently).
        """
        if value is None:
            return None
        if not isinstance(value, Decimal):
            raise InvalidRequestError(
                f"an amount in US dollars must be a Decimal, not {type(value).__name__}"
            )
        return to_nanos(value)

    def process_result_value(self, value: int | Decimal | None, dialect: Dialect) -> Decimal | None:
        """Nano-dollars (PostgreSQL's ``SUM`` answers a ``numeric``) to dollars."""
        return None if value is None else from_nanos(int(value))


def _now() -> datetime:
    return datetime.now(UTC)


class ModelRowRow(SQLModel, table=True):
    """Table ``models``: one model row (a named launch configuration of an adapter).

    ``additive_flags`` holds a JSON list of strings, ``metadata`` a JSON object (the Python
    attribute is ``meta``: ``metadata`` is reserved by SQLAlchemy's declarative classes).
    """

    __tablename__ = "models"
    __table_args__ = (sa.UniqueConstraint("name"),)

    id: str = Field(primary_key=True, sa_type=_ID)
    name: str = Field(sa_type=sa.Text)
    adapter: str = Field(sa_type=sa.Text)
    binary: str | None = Field(default=None, sa_type=sa.Text)
    model: str | None = Field(default=None, sa_type=sa.Text)
    permission_mode: str = Field(default="workspace", sa_type=sa.Text)
    additive_flags: str = Field(default="[]", sa_type=sa.Text)
    meta: str = Field(default="{}", sa_type=sa.Text, sa_column_kwargs={"name": "metadata"})
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)


class SessionRow(SQLModel, table=True):
    """Table ``sessions``: one conversation in a workspace with one adapter.

    ``model_row_id`` is the model row the session was created from (None: none, or the row
    was deleted); ``options`` a JSON object of per-session adapter options.
    ``clear_generation`` counts ``/clear`` (0 = never cleared), ``cleared_at`` is the time of
    the last one.
    """

    __tablename__ = "sessions"

    id: str = Field(primary_key=True, sa_type=_ID)
    title: str | None = Field(default=None, sa_type=sa.Text)
    workspace: str = Field(sa_type=sa.Text)
    adapter: str = Field(sa_type=sa.Text)
    model: str | None = Field(default=None, sa_type=sa.Text)
    permission_mode: str = Field(default="workspace", sa_type=sa.Text)
    attended: bool = Field(default=True)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime, index=True)
    updated_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    model_row_id: str | None = Field(default=None, foreign_key="models.id", index=True, sa_type=_ID)
    options: str = Field(default="{}", sa_type=sa.Text, sa_column_kwargs={"server_default": "{}"})
    flow_label: str = Field(default="", sa_type=sa.Text, sa_column_kwargs={"server_default": ""})
    space_id: str | None = Field(default=None, foreign_key="spaces.id", index=True, sa_type=_ID)
    clear_generation: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    cleared_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class RunRow(SQLModel, table=True):
    """Table ``runs``: one turn of a session, or a child agent's run within one.

    A child run names its ``parent_run_id`` (a run of the same session), its ``role`` and the
    ``resume_key`` it was spawned with; all three are NULL for a root turn.
    """

    __tablename__ = "runs"
    __table_args__ = (sa.UniqueConstraint("session_id", "turn_index"),)

    id: str = Field(primary_key=True, sa_type=_ID)
    session_id: str = Field(foreign_key="sessions.id", sa_type=_ID)  # indexed by the unique key
    turn_index: int
    status: str = Field(index=True, sa_type=sa.String(32))
    prompt: str = Field(sa_type=sa.Text)
    reason: str | None = Field(default=None, sa_type=sa.Text)
    vendor_session_id: str | None = Field(default=None, sa_type=sa.Text)
    resumed: bool = Field(default=False)
    pid: int | None = Field(default=None)
    exit_code: int | None = Field(default=None)
    input_tokens: int = Field(default=0, sa_type=sa.BigInteger)
    output_tokens: int = Field(default=0, sa_type=sa.BigInteger)
    cache_creation_input_tokens: int = Field(default=0, sa_type=sa.BigInteger)
    cache_read_input_tokens: int = Field(default=0, sa_type=sa.BigInteger)
    # the amount's column holds nano-dollars: its name says so, the attribute is the amount
    cost_usd: Decimal | None = Field(
        default=None, sa_column=sa.Column("cost_nano_usd", UsdNanos(), nullable=True)
    )
    usage_estimated: bool = Field(default=False)
    result_text: str | None = Field(default=None, sa_type=sa.Text)
    owner: str = Field(sa_type=sa.Text)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime, index=True)
    plan_mode: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    author: str | None = Field(default=None, sa_type=sa.Text)
    started_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    parent_run_id: str | None = Field(default=None, foreign_key="runs.id", index=True, sa_type=_ID)
    role: str | None = Field(default=None, sa_type=sa.Text)
    resume_key: str | None = Field(default=None, sa_type=sa.Text)
    receipt: str | None = Field(default=None, sa_type=sa.Text)  # a child's receipt (JSON object)
    host_services: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    # a pipeline stage worker's run: its pipeline, attempt, stage name and plan item (NULL otherwise)
    pipeline_id: str | None = Field(default=None, index=True, sa_type=_ID)
    pipeline_attempt_id: str | None = Field(default=None, sa_type=_ID)
    stage: str | None = Field(default=None, sa_type=sa.Text)
    item_id: str | None = Field(default=None, sa_type=_ID)


class RunEventRow(SQLModel, table=True):
    """Table ``run_events``: the ordered event log of a run."""

    __tablename__ = "run_events"
    __table_args__ = (sa.UniqueConstraint("run_id", "seq"),)

    id: int | None = Field(
        default=None,
        primary_key=True,
        sa_type=sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
    )
    run_id: str = Field(foreign_key="runs.id", sa_type=_ID)  # indexed by the unique key
    seq: int
    kind: str = Field(sa_type=sa.Text)
    data: str = Field(sa_type=sa.Text)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)


class VendorSessionRow(SQLModel, table=True):
    """Table ``vendor_sessions``: vendor conversation ids kept for reuse.

    ``clear_generation`` is the session's clear generation the record was saved in (a record
    of an older generation is stale); ``cursor`` the highest ``session_messages.seq`` the
    vendor conversation has seen (0 = none); ``last_used_at`` orders child task records for
    least-recently-used pruning; ``checkpoint_id`` the checkpoint a cold start carried.
    """

    __tablename__ = "vendor_sessions"
    __table_args__ = (sa.UniqueConstraint("session_id", "key"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: str = Field(foreign_key="sessions.id", sa_type=_ID)
    key: str = Field(sa_type=sa.Text)
    vendor_session_id: str = Field(sa_type=sa.Text)
    fingerprint: str = Field(sa_type=sa.Text)
    cwd: str = Field(sa_type=sa.Text)
    clear_generation: int = Field(default=0)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    cursor: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    last_used_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    checkpoint_id: int | None = Field(
        default=None, foreign_key="session_checkpoints.id", index=True, sa_type=_BIG_ID
    )


class SessionMessageRow(SQLModel, table=True):
    """Table ``session_messages``: the transcript of a session, one row per message.

    ``seq`` is per session, starts at 1 and only grows, across every clear generation (never
    reused); ``role`` is ``user`` or ``assistant``; ``clear_generation`` the session's
    generation the message was written in; ``adapter`` the adapter that answered (assistant
    messages), ``run_id`` the run that wrote it, when known.
    """

    __tablename__ = "session_messages"
    __table_args__ = (sa.UniqueConstraint("session_id", "seq"),)

    id: int | None = Field(default=None, primary_key=True, sa_type=_BIG_ID)
    session_id: str = Field(foreign_key="sessions.id", sa_type=_ID)  # indexed by the unique key
    seq: int
    role: str = Field(sa_type=sa.String(16))
    text: str = Field(sa_type=sa.Text)
    run_id: str | None = Field(default=None, foreign_key="runs.id", index=True, sa_type=_ID)
    adapter: str | None = Field(default=None, sa_type=sa.Text)
    clear_generation: int
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)


class SessionCheckpointRow(SQLModel, table=True):
    """Table ``session_checkpoints``: published compaction summaries of a session (seed 003).

    A checkpoint summarises the messages ``first_seq``..``through_seq`` (inclusive) of one
    clear generation; ``covered_chars`` is the length of the text it replaces. Within a
    generation ``through_seq`` only grows (unique key).
    """

    __tablename__ = "session_checkpoints"
    __table_args__ = (sa.UniqueConstraint("session_id", "clear_generation", "through_seq"),)

    id: int | None = Field(default=None, primary_key=True, sa_type=_BIG_ID)
    session_id: str = Field(foreign_key="sessions.id", sa_type=_ID)  # indexed by the unique key
    clear_generation: int
    first_seq: int
    through_seq: int
    summary: str = Field(sa_type=sa.Text)
    covered_chars: int = Field(sa_type=sa.BigInteger)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)


class ApprovalRow(SQLModel, table=True):
    """Table ``approvals``: permission requests and their one decision."""

    __tablename__ = "approvals"

    id: str = Field(primary_key=True, sa_type=_ID)
    run_id: str | None = Field(default=None, foreign_key="runs.id", index=True, sa_type=_ID)
    session_id: str = Field(foreign_key="sessions.id", index=True, sa_type=_ID)
    tool_id: str = Field(sa_type=sa.Text)
    subject: str | None = Field(default=None, sa_type=sa.Text)
    reason: str | None = Field(default=None, sa_type=sa.Text)
    input: str = Field(sa_type=sa.Text)
    explanation: str | None = Field(default=None, sa_type=sa.Text)
    vendor_request_id: str | None = Field(default=None, sa_type=sa.Text)
    status: str = Field(index=True, sa_type=sa.String(32))
    decided_by: str | None = Field(default=None, sa_type=sa.Text)
    decision_reason: str | None = Field(default=None, sa_type=sa.Text)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    decided_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    kind: str = Field(default="tool", sa_type=sa.String(16), sa_column_kwargs={"server_default": "tool"})
    questions: str | None = Field(default=None, sa_type=sa.Text)
    answers: str | None = Field(default=None, sa_type=sa.Text)
    grant_id: str | None = Field(default=None, sa_type=_ID)
    action_ids: str | None = Field(default=None, sa_type=sa.Text)


class WorkPlanRow(SQLModel, table=True):
    """Table ``work_plans``: the current work plan of a session; ``revision`` counts its saves (1: the
    first), so an update made from an older read is refused (FACTS.md §8)."""

    __tablename__ = "work_plans"

    session_id: str = Field(primary_key=True, foreign_key="sessions.id", sa_type=_ID)
    plan: str = Field(sa_type=sa.Text)
    updated_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    revision: int = Field(default=1, sa_column_kwargs={"server_default": "1"})


class PlanFeedbackRow(SQLModel, table=True):
    """Table ``plan_feedback``: what a person said about a session's work plan or one of its steps.

    ``seq`` orders a session's items (1, 2, ...); ``plan_revision`` is the plan's revision the item
    was given at; ``status`` is ``pending``, ``applied`` or ``needs_clarification``; ``response`` is
    the agent's latest note (``responded_at``, ``responded_revision``: when, and the revision its
    update saved); ``replies`` (JSON list) the person's answers, each reopening the item.
    """

    __tablename__ = "plan_feedback"
    __table_args__ = (sa.UniqueConstraint("session_id", "seq"),)

    id: str = Field(primary_key=True, sa_type=_ID)
    session_id: str = Field(foreign_key="sessions.id", sa_type=_ID)
    seq: int
    text: str = Field(sa_type=sa.Text)
    step_id: str | None = Field(default=None, sa_type=sa.Text)
    author: str = Field(sa_type=sa.Text)
    plan_revision: int
    status: str = Field(sa_type=sa.String(24))
    response: str | None = Field(default=None, sa_type=sa.Text)
    responded_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    responded_revision: int | None = Field(default=None)
    replies: str = Field(default="[]", sa_type=sa.Text)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)


class PermissionRuleRow(SQLModel, table=True):
    """Table ``permission_rules``: rules an operator added at runtime (``octipusctl rules add``).

    ``rule`` is the rule's text (``toolId(matcher)`` or a bare tool id, FACTS.md §3 syntax);
    ``level`` is ``allow``, ``ask`` or ``deny``. These are the "per-tool policies" of seed 003;
    a rule on the bare id ``cli-native`` is a legacy policy covering every native tool.
    """

    __tablename__ = "permission_rules"
    __table_args__ = (sa.UniqueConstraint("level", "rule"),)

    id: str = Field(primary_key=True, sa_type=_ID)
    level: str = Field(sa_type=sa.String(16))
    rule: str = Field(sa_type=sa.Text)
    created_by: str = Field(sa_type=sa.Text)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)


class PermissionGrantRow(SQLModel, table=True):
    """Table ``permission_grants``: scoped grants with conditions, expiry and usage limits.

    Conditions: ``session_id`` (only that session) and ``workspace`` (only calls in that folder
    or below). ``uses`` counts the calls the grant allowed; it never exceeds ``max_uses``.
    ``approval_id`` names the approval whose answer created it, if any.
    """

    __tablename__ = "permission_grants"

    id: str = Field(primary_key=True, sa_type=_ID)
    tool_id: str = Field(sa_type=sa.Text)
    matcher: str | None = Field(default=None, sa_type=sa.Text)
    level: str = Field(sa_type=sa.String(16))
    session_id: str | None = Field(default=None, foreign_key="sessions.id", index=True, sa_type=_ID)
    workspace: str | None = Field(default=None, sa_type=sa.Text)
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    max_uses: int | None = Field(default=None)
    uses: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    revoked_by: str | None = Field(default=None, sa_type=sa.Text)
    created_by: str = Field(sa_type=sa.Text)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    approval_id: str | None = Field(default=None, sa_type=_ID)
    note: str | None = Field(default=None, sa_type=sa.Text)


class SpaceRow(SQLModel, table=True):
    """Table ``spaces``: shared spaces (FACTS.md §5); a space is archived, never deleted here."""

    __tablename__ = "spaces"
    __table_args__ = (sa.UniqueConstraint("name"),)

    id: str = Field(primary_key=True, sa_type=_ID)
    name: str = Field(sa_type=sa.Text)
    created_by: str = Field(sa_type=sa.Text)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    archived_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class SpaceMemberRow(SQLModel, table=True):
    """Table ``space_members``: one member's role in a space (read on every request)."""

    __tablename__ = "space_members"

    space_id: str = Field(primary_key=True, foreign_key="spaces.id", sa_type=_ID)
    user: str = Field(primary_key=True, sa_type=sa.Text)
    role: str = Field(sa_type=sa.String(16))
    added_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)


class ToolActionRow(SQLModel, table=True):
    """Table ``tool_actions``: the action journal, one row per mutating tool call (seed 000).

    Never holds argument or result bodies: ``args_hash`` is a SHA-256 of the canonical JSON
    arguments, ``detail`` one line of evidence. ``outcome`` is ``started`` (written before the
    call), ``completed``, ``not_executed`` or ``uncertain``; ``recovery_state`` follows seed
    004's state machine for uncertain actions; ``review_id`` is the recovery review (an
    approval) that acknowledged it. ``owner`` is the daemon instance that ran it (orphans after
    a restart). ``invocation_id`` links a call a person started by hand. ``in_flight_until`` is
    when no dispatched request of the call can land any more (``started_at`` plus the call's
    deadline; NULL: no bound known), ``dispatch`` where its request went (JSON, e.g. an MCP
    session id) and ``dispatch_ended_at`` when Octipus positively ended that transport.
    ``author`` is who made the call: the space member who started the turn (``user`` stays the
    account the call runs for, the recovery scope); NULL in records older than the column.
    """

    __tablename__ = "tool_actions"
    __table_args__ = (sa.Index("ix_tool_actions_user_tool_key", "user", "tool", "idempotency_key"),)

    id: str = Field(primary_key=True, sa_type=_ID)
    user: str = Field(sa_type=sa.Text, index=True)
    session_id: str | None = Field(default=None, foreign_key="sessions.id", index=True, sa_type=_ID)
    run_id: str | None = Field(default=None, foreign_key="runs.id", index=True, sa_type=_ID)
    agent: str | None = Field(default=None, sa_type=sa.Text)
    pipeline_id: str | None = Field(default=None, sa_type=sa.Text, index=True)
    node_id: str | None = Field(default=None, sa_type=sa.Text)
    origin: str = Field(sa_type=sa.String(16))
    invocation_id: str | None = Field(default=None, sa_type=_ID)
    tool: str = Field(sa_type=sa.Text)
    args_hash: str = Field(sa_type=sa.String(64))
    risk_class: str = Field(sa_type=sa.String(16))
    idempotency_key: str | None = Field(default=None, sa_type=sa.Text)
    recovery_owner: str | None = Field(default=None, sa_type=sa.Text)
    deadline_seconds: float = Field(sa_type=sa.Float)
    owner: str = Field(sa_type=sa.Text)
    outcome: str = Field(sa_type=sa.String(16), index=True)
    detail: str | None = Field(default=None, sa_type=sa.Text)
    recovery_state: str | None = Field(default=None, sa_type=sa.String(24))
    deadline_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    review_id: str | None = Field(default=None, sa_type=_ID)
    reviewed_by: str | None = Field(default=None, sa_type=sa.Text)
    reviewed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    started_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    in_flight_until: datetime | None = Field(default=None, sa_type=UTCDateTime)
    dispatch: str | None = Field(default=None, sa_type=sa.Text)
    dispatch_ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    author: str | None = Field(default=None, sa_type=sa.Text)


class ActionReceiptRow(SQLModel, table=True):
    """Table ``action_receipts``: the append-only receipt of an action (seed 004): contract at
    start, outcome, probes, compensations, escalations, reviews; small JSON evidence only."""

    __tablename__ = "action_receipts"

    id: int | None = Field(
        default=None,
        primary_key=True,
        sa_type=sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
    )
    action_id: str = Field(foreign_key="tool_actions.id", index=True, sa_type=_ID)
    kind: str = Field(sa_type=sa.String(32))
    state: str | None = Field(default=None, sa_type=sa.String(24))
    data: str = Field(default="{}", sa_type=sa.Text)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)


class ToolInvocationRow(SQLModel, table=True):
    """Table ``tool_invocations``: a tool call a person started by hand (seed 001's "Test-tab"
    call), which may owe an execution once approved.

    ``request_id`` is the client's idempotency key (unique per user): a retried request
    returns the stored invocation instead of running again. ``arguments`` are kept only until
    the call ends. ``claim_token``/``claimed_at``/``claimed_by`` are the exact claim taken
    before dispatch (seed 001).
    """

    __tablename__ = "tool_invocations"
    __table_args__ = (sa.UniqueConstraint("user", "request_id"),)

    id: str = Field(primary_key=True, sa_type=_ID)
    request_id: str | None = Field(default=None, sa_type=sa.Text)
    user: str = Field(sa_type=sa.Text)
    session_id: str = Field(foreign_key="sessions.id", index=True, sa_type=_ID)
    tool: str = Field(sa_type=sa.Text)
    arguments: str | None = Field(default=None, sa_type=sa.Text)
    args_hash: str = Field(sa_type=sa.String(64))
    status: str = Field(sa_type=sa.String(24), index=True)
    approval_id: str | None = Field(default=None, sa_type=_ID)
    claim_token: str | None = Field(default=None, sa_type=_ID)
    claimed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    claimed_by: str | None = Field(default=None, sa_type=sa.Text)
    action_id: str | None = Field(default=None, sa_type=_ID)
    result: str | None = Field(default=None, sa_type=sa.Text)
    is_error: bool = Field(default=False)
    error: str | None = Field(default=None, sa_type=sa.Text)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class VaultEntryRow(SQLModel, table=True):
    """Table ``vault_entries``: one named credential of the vault (``octipusd.vault``).

    ``ciphertext`` is the value encrypted with the vault's key (a Fernet token); ``users`` and
    ``tools`` are JSON lists of strings (the users who may use it, the tool ids or patterns it may
    be injected into); ``last_used_at``/``last_used_tool``: its latest resolution.
    """

    __tablename__ = "vault_entries"

    name: str = Field(primary_key=True, sa_type=sa.String(128))
    ciphertext: str = Field(sa_type=sa.Text)
    users: str = Field(default="[]", sa_type=sa.Text)
    tools: str = Field(default="[]", sa_type=sa.Text)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    last_used_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_used_tool: str | None = Field(default=None, sa_type=sa.Text)


class PipelineTemplateRow(SQLModel, table=True):
    """Table ``pipeline_templates``: a stored pipeline template (FACTS.md §6).

    ``owner`` is the user who imported it (NULL: unowned, visible to every user); ``document`` is the
    template as its export envelope (JSON ``{octipusRecipe: 1, name, description, steps,
    parameters}``). Presets ship with the package and are not rows.
    """

    __tablename__ = "pipeline_templates"
    __table_args__ = (sa.UniqueConstraint("owner", "name"),)

    id: str = Field(primary_key=True, sa_type=_ID)
    name: str = Field(sa_type=sa.Text)
    owner: str | None = Field(default=None, sa_type=sa.Text)
    description: str | None = Field(default=None, sa_type=sa.Text)
    document: str = Field(sa_type=sa.Text)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)


class PipelineRow(SQLModel, table=True):
    """Table ``pipelines``: one pipeline run's public record (the engine keeps where its workflow is).

    ``template`` is the template document it runs (JSON, frozen at creation), ``params`` its
    parameter values (JSON object), ``graph`` the compiled graph (JSON). ``plan`` is the work plan
    linked at launch (JSON: whether the pipeline created it, its title and goal kept). ``metadata_``
    (column ``metadata``) holds allowances and other JSON state (``approvedCalls``, next issue);
    ``pending_changes`` the item edits queued for the next item boundary (JSON list).
    ``generation`` counts the walks (each resume or rewind starts one); ``workflow_id`` is the
    engine's id of the current walk; ``current_node``/``current_item_id`` where it is;
    ``tokens_used`` the stage workers' tokens (the pipeline pool).
    """

    __tablename__ = "pipelines"

    id: str = Field(primary_key=True, sa_type=_ID)
    session_id: str = Field(foreign_key="sessions.id", index=True, sa_type=_ID)
    user: str = Field(sa_type=sa.Text)
    workspace: str = Field(sa_type=sa.Text)
    name: str = Field(sa_type=sa.Text)
    template_id: str | None = Field(default=None, sa_type=sa.Text)
    template: str = Field(sa_type=sa.Text)
    params: str = Field(default="{}", sa_type=sa.Text)
    graph: str = Field(sa_type=sa.Text)
    status: str = Field(index=True, sa_type=sa.String(24))
    summary: str | None = Field(default=None, sa_type=sa.Text)
    error: str | None = Field(default=None, sa_type=sa.Text)
    plan: str | None = Field(default=None, sa_type=sa.Text)
    metadata_: str = Field(default="{}", sa_column=sa.Column("metadata", sa.Text(), nullable=False))
    pending_changes: str = Field(default="[]", sa_type=sa.Text)
    tokens_used: int = Field(default=0, sa_type=sa.BigInteger)
    generation: int = Field(default=0)
    workflow_id: str | None = Field(default=None, sa_type=sa.Text)
    current_node: str | None = Field(default=None, sa_type=sa.String(16))
    current_item_id: str | None = Field(default=None, sa_type=_ID)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class PipelineItemRow(SQLModel, table=True):
    """Table ``pipeline_items``: one plan item of a pipeline (FACTS.md §6, the seed's ``acceptance``).

    ``ordinal`` orders the items (reordering rewrites it); ``evidence`` is what a person gave when
    the item was skipped as already delivered.
    """

    __tablename__ = "pipeline_items"

    id: str = Field(primary_key=True, sa_type=_ID)
    pipeline_id: str = Field(foreign_key="pipelines.id", index=True, sa_type=_ID)
    ordinal: int
    title: str = Field(sa_type=sa.Text)
    detail: str | None = Field(default=None, sa_type=sa.Text)
    acceptance: str | None = Field(default=None, sa_type=sa.Text)
    status: str = Field(sa_type=sa.String(24))
    created_by_node_key: str | None = Field(default=None, sa_type=sa.String(16))
    created_by_user: str | None = Field(default=None, sa_type=sa.Text)
    result: str | None = Field(default=None, sa_type=sa.Text)
    error: str | None = Field(default=None, sa_type=sa.Text)
    evidence: str | None = Field(default=None, sa_type=sa.Text)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)


class PipelineNodeRow(SQLModel, table=True):
    """Table ``pipeline_nodes``: one graph node's state in a pipeline (``n0``, ``n1``, ...).

    ``traversals`` counts entries through a bounded backward edge (``qa_fail``); ``retries`` the
    contract retries of its current visit; ``output`` its latest completed output.
    """

    __tablename__ = "pipeline_nodes"

    pipeline_id: str = Field(primary_key=True, foreign_key="pipelines.id", sa_type=_ID)
    key: str = Field(primary_key=True, sa_type=sa.String(16))
    kind: str = Field(sa_type=sa.String(16))
    status: str = Field(sa_type=sa.String(24))
    traversals: int = Field(default=0)
    retries: int = Field(default=0)
    output: str | None = Field(default=None, sa_type=sa.Text)
    error: str | None = Field(default=None, sa_type=sa.Text)
    updated_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)


class PipelineAttemptRow(SQLModel, table=True):
    """Table ``pipeline_attempts``: one stage attempt (seed 003: its id is kept in the checkpoint).

    A resume continues the same attempt (its vendor session is kept under the reuse key
    ``<adapter>::pipeline:<id>``); ``run_ids`` lists the stage-worker runs it took (JSON list);
    ``incomplete_text`` is the text so far of an unfinished attempt (never its output); ``counters``
    the evidence counters (JSON); ``step_id`` the engine's step number (a ``fromStage`` rewind forks
    there).
    """

    __tablename__ = "pipeline_attempts"

    id: str = Field(primary_key=True, sa_type=_ID)
    pipeline_id: str = Field(foreign_key="pipelines.id", index=True, sa_type=_ID)
    node_key: str = Field(sa_type=sa.String(16))
    stage: str = Field(sa_type=sa.Text)
    item_id: str | None = Field(default=None, sa_type=_ID)
    number: int
    start_reason: str = Field(sa_type=sa.Text)
    status: str = Field(sa_type=sa.String(24))
    run_ids: str = Field(default="[]", sa_type=sa.Text)
    incomplete_text: str | None = Field(default=None, sa_type=sa.Text)
    result: str | None = Field(default=None, sa_type=sa.Text)
    error: str | None = Field(default=None, sa_type=sa.Text)
    retry_reason: str | None = Field(default=None, sa_type=sa.Text)
    counters: str | None = Field(default=None, sa_type=sa.Text)
    tokens: int = Field(default=0, sa_type=sa.BigInteger)
    step_id: int | None = Field(default=None)
    generation: int = Field(default=0)
    started_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class PipelineEventRow(SQLModel, table=True):
    """Table ``pipeline_events``: a pipeline's durable history (``seq`` per pipeline, from 1).

    ``item_id``/``attempt_id`` are the item and attempt the event belongs to (NULL: unassigned; an
    event's provenance is never guessed); ``data`` is a JSON object.
    """

    __tablename__ = "pipeline_events"
    __table_args__ = (sa.UniqueConstraint("pipeline_id", "seq"),)

    id: int | None = Field(default=None, primary_key=True, sa_type=_BIG_ID)
    pipeline_id: str = Field(foreign_key="pipelines.id", sa_type=_ID)  # indexed by the unique key
    seq: int
    kind: str = Field(sa_type=sa.Text)
    item_id: str | None = Field(default=None, sa_type=_ID)
    attempt_id: str | None = Field(default=None, sa_type=_ID)
    data: str = Field(default="{}", sa_type=sa.Text)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)


class MonitorRow(SQLModel, table=True):
    """Table ``monitors``: one monitor's public record (FACTS.md §7; the engine keeps its workflow).

    ``source``, ``condition``, ``baseline``, ``last_observation``, ``match``, ``cursor`` and
    ``delivery`` are JSON (``condition``, ``baseline``, ``last_observation``, ``match`` and
    ``delivery`` may be NULL). ``interval_seconds`` is a float (seconds between checks);
    ``deadline_at`` does not move when the monitor is paused.
    """

    __tablename__ = "monitors"

    id: str = Field(primary_key=True, sa_type=_ID)
    session_id: str = Field(foreign_key="sessions.id", index=True, sa_type=_ID)
    user: str = Field(sa_type=sa.Text)
    workspace: str = Field(sa_type=sa.Text)
    status: str = Field(index=True, sa_type=sa.String(24))
    source: str = Field(sa_type=sa.Text)
    condition: str | None = Field(default=None, sa_type=sa.Text)
    continuation: str | None = Field(default=None, sa_type=sa.Text)
    interval_seconds: float = Field(sa_type=sa.Float)
    deadline_at: datetime = Field(sa_type=UTCDateTime)
    baseline: str | None = Field(default=None, sa_type=sa.Text)
    last_observation: str | None = Field(default=None, sa_type=sa.Text)
    match: str | None = Field(default=None, sa_type=sa.Text)
    cursor: str = Field(default="{}", sa_type=sa.Text)
    checks: int = Field(default=0)
    fired: str | None = Field(default=None, sa_type=sa.String(16))
    delivery: str | None = Field(default=None, sa_type=sa.Text)
    error: str | None = Field(default=None, sa_type=sa.Text)
    paused_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    created_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=_now, sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
