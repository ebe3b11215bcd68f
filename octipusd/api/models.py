"""Request and response models of the v1 API (the only types clients share with the daemon).

Request fields take their bounds from :data:`~octipusd.api.limits.API_LIMITS` (names and ids
:data:`Name`, paths :data:`FsPath`); no float field takes ``NaN`` or an infinity.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, PlainSerializer

from octipusd.api import API_VERSION as API_VERSION
from octipusd.api.health_models import (  # re-exported
    NOTIFY_TEST_ANSWER_S as NOTIFY_TEST_ANSWER_S,
    AdapterHealth as AdapterHealth,
    Health as Health,
    NotifierHealth as NotifierHealth,
    NotifierTargetHealth as NotifierTargetHealth,
    NotifyTestOut as NotifyTestOut,
    NotifyTestTarget as NotifyTestTarget,
    ReapActionName as ReapActionName,
    ReapReportOut as ReapReportOut,
    ShellSandboxHealth as ShellSandboxHealth,
    VaultHealth as VaultHealth,
    WebHealth as WebHealth,
    WebOut as WebOut,
    WorktreeReaperOut as WorktreeReaperOut,
)
from octipusd.api.limits import API_LIMITS, MAX_GRANT_USES
from octipusd.money import usd_text

#: A name or an id in a request (a session, a space, a user, a tool id...).
Name = Annotated[str, Field(max_length=API_LIMITS.max_name_chars)]
#: A file-system path in a request.
FsPath = Annotated[str, Field(max_length=API_LIMITS.max_path_chars)]
#: An amount in US dollars (a cost): exact, and sent as a decimal string (``"0.0245"``: no exponent,
#: no trailing zeros) so that no client's JSON parser turns it into a binary float
#: (:mod:`octipusd.money`).
UsdAmount = Annotated[
    Decimal,
    PlainSerializer(usd_text, return_type=str, when_used="json"),
    Field(description="US dollars, an exact decimal string such as 0.0245"),
]
#: A grant's lifetime (seconds).
TtlSeconds = Annotated[float, Field(gt=0, le=API_LIMITS.max_ttl_seconds)]
#: A grant's usage limit (calls).
MaxUses = Annotated[int, Field(ge=1, le=MAX_GRANT_USES)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class SessionCreate(_Model):
    """``POST /v1/sessions``: a new Octipus session in a workspace.

    ``workspace`` must be an existing absolute directory. ``permission_mode`` is
    ``workspace`` (acceptEdits, the default), ``full`` (bypass), ``plan`` or ``default``.
    ``attended`` False makes an unattended session: ASK decisions are refused, not asked.

    ``model_row`` (a model row's id or name) creates the session from that row: it takes the
    row's ``adapter``, ``model`` and ``permission_mode``; giving any of them with a different
    value is a 400 (``model: null`` counts as not given). ``options`` (an object: the
    ``cliAgent`` keys, e.g. ``{"transport": "exec"}``) are per-session adapter options the
    runtime merges over the row's ``metadata.cliAgent``.

    ``space`` (a space's id or name) puts the session in a shared space: it needs a model row
    with ``metadata.cliAgent.sharedUse: true`` and an adapter with a space mode.
    """

    workspace: FsPath
    adapter: Name = "claude-code"
    title: str | None = None
    model: Name | None = None
    permission_mode: Literal["workspace", "full", "plan", "default"] = "workspace"
    attended: bool = True
    model_row: Name | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    space: Name | None = None


class UsageTotalsOut(_Model):
    """``GET /v1/sessions/{id}/usage``: what the session's runs used, summed over all of them.

    ``cost_usd`` sums the costs the vendors reported (an exact decimal string, null: none did);
    ``runs_without_cost`` runs are not in it. ``estimated``: some run's tokens were estimated by Octipus, not reported.
    """

    runs: int
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    cost_usd: UsdAmount | None
    runs_without_cost: int
    estimated: bool


class SessionOut(_Model):
    """A session; ``model_row_id`` is the row it was created from (null: none, or deleted).

    ``clear_generation`` counts the session's ``/clear`` commands (0: never cleared) and
    ``cleared_at`` is the time of the last one (seed 003 "What invalidates a stored session").
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
    model_row_id: str | None
    options: dict[str, Any]
    flow_label: str = ""
    space_id: str | None = None
    clear_generation: int = 0
    cleared_at: datetime | None = None


class ModelRowCreate(_Model):
    """``POST /v1/models``: a new model row (a named launch configuration of one adapter).

    ``name``: unique, 1-100 ASCII letters, digits, ``.``, ``_``, ``-`` (not 32 hex characters).
    ``adapter``: an installed adapter (``claude-code``, ``claude-glm``, ``claude-kimi``,
    ``codex``, ``vibe``, ``antigravity``). ``binary``: a command name or an absolute path
    overriding the adapter's ``cliModels`` binary. ``permission_mode``: ``workspace``
    (acceptEdits, the default), ``full``, ``plan`` or ``default``. ``additive_flags``: extra
    vendor flags the adapter allows (stored normalized, e.g. ``--effort high`` becomes
    ``--effort=high``). ``metadata``: an object; ``metadata.cliAgent`` holds ``transport``
    (string), ``inheritApiKeys`` and ``sharedUse`` (booleans), ``env`` (name -> value),
    ``passEnv`` (names of daemon variables the vendor also gets; no ``OCTIPUS_*``) and
    adapter-specific keys.
    """

    name: str
    adapter: str
    binary: str | None = None
    model: str | None = None
    permission_mode: str = "workspace"
    additive_flags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ModelRowUpdate(_Model):
    """``PATCH /v1/models/{id_or_name}``: only the fields present change, each replaced whole.

    ``binary: null`` and ``model: null`` clear them; ``null`` for any other field is a 400.
    The saved row is validated as on create (a changed adapter re-checks the stored flags).
    """

    name: str | None = None
    adapter: str | None = None
    binary: str | None = None
    model: str | None = None
    permission_mode: str | None = None
    additive_flags: list[str] | None = None
    metadata: dict[str, Any] | None = None


class Capabilities(_Model):
    """Seed 003's "Permissions and limits" row for one model row (its adapter and transport).

    Attributes:
        adapter: The table's adapter label, e.g. ``"Claude Code / GLM / Kimi"``.
        octipus_tools: How the vendor reaches Octipus's tools (``Scoped MCP``, ``Terminal bridge``).
        vendor_planning_mode: What plan mode maps to (``plan``, ``read-only sandbox``...).
        activity: How progress arrives (``Structured stream``, ``Buffered text``...).
        vendor_approval_relay: Whether vendor approvals enter Octipus approvals.
        transport: The row's ``metadata.cliAgent.transport`` taken into account (null: default).
        source: ``adapter`` (the row the adapter declares, ``Adapter.capabilities``) or
            ``undeclared`` (the adapter declares none, or is not installed: every column says so).
    """

    adapter: str
    octipus_tools: str
    vendor_planning_mode: str
    activity: str
    vendor_approval_relay: str
    transport: str | None
    source: Literal["adapter", "undeclared"]


class ModelRowOut(_Model):
    """A model row with its capabilities."""

    id: str
    name: str
    adapter: str
    binary: str | None
    model: str | None
    permission_mode: str
    additive_flags: list[str]
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    capabilities: Capabilities


class TurnCreate(_Model):
    """``POST /v1/sessions/{id}/turns``: the user text of the next turn.

    ``plan`` runs this turn in plan mode (overriding the row's permission mode for this
    invocation only). ``author`` names the space member posting it (default: the daemon's user).
    ``host_services`` (seed 003's ``hostServices``, until pipelines set it per stage) lets this
    run's own shell commands (``shell__run``, its children's gate commands) share the host network
    and ``/var/run/docker.sock`` under the shell sandbox; the children it spawns do not inherit it.
    """

    prompt: str = Field(min_length=1)
    plan: bool = False
    author: Name | None = None
    host_services: bool = Field(
        default=False,
        description="share the host network and the Docker socket with this run's own shell commands "
        "under security.shellSandbox (root-equivalent: only for commands you trust); no effect with "
        "the sandbox off",
    )


class SteerCreate(_Model):
    """``POST /v1/sessions/{id}/steer``: guidance for the session's live run."""

    text: str = Field(min_length=1)


class SteerOut(_Model):
    """Where the guidance went: ``stdin`` (into the running turn) or ``queued`` (run context)."""

    run_id: str
    delivery: Literal["stdin", "queued"]


class RunOut(_Model):
    """A run (one turn's vendor invocation).

    A child's run names its ``parent_run_id`` and ``role``; ``resume_key`` is the stored key
    (``<parent scope>><role>:<task id>``) of a child spawned with a ``resumeKey`` (seed 003
    "Resuming child sessions per role and task"). All three are null for a root turn.
    """

    id: str
    session_id: str
    turn_index: int
    status: str
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
    cost_usd: UsdAmount | None
    usage_estimated: bool
    result_text: str | None
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


class RunStop(_Model):
    """``POST /v1/runs/{id}/stop``."""

    reason: str = "stopped by the user"


class EventOut(_Model):
    """A stored run event."""

    run_id: str
    seq: int
    kind: str
    data: dict[str, Any]
    created_at: datetime


class CompactCreate(_Model):
    """``POST /v1/sessions/{id}/compact``: summarize the current generation's older messages.

    ``keep_turns`` (also accepted as ``keepTurns``, 0 to 100, default 2) is how many of the most
    recent turns stay verbatim after the checkpoint; everything before them is summarized.
    """

    keep_turns: int = Field(default=2, ge=0, le=100, validation_alias=AliasChoices("keep_turns", "keepTurns"))


class CompactionOut(_Model):
    """What ``POST /v1/sessions/{id}/compact`` did (seed 003 "Compaction").

    Attributes:
        published: True when a checkpoint was published (only then did vendor records rotate).
        checkpoint_id: The new checkpoint (null: nothing published).
        first_seq: First message sequence number the checkpoint covers.
        through_seq: Last message sequence number it covers (inclusive).
        covered_messages: How many messages the summary replaces.
        covered_chars: Their total length in characters.
        summary_chars: The summary's length in characters.
        rotated: Keys of the root vendor records rotated after publication (child task
            sessions are kept).
        reason: Why nothing was published (e.g. ``nothing to compact``); null when published.
    """

    published: bool
    checkpoint_id: int | None
    first_seq: int | None
    through_seq: int | None
    covered_messages: int
    covered_chars: int
    summary_chars: int
    rotated: list[str]
    reason: str | None


class VendorSessionOut(_Model):
    """A stored vendor conversation of a session, resumed by the next launch under ``key``.

    ``key`` is the adapter for the root conversation, ``<adapter>::<resume key>`` for a keyed
    child. ``cursor`` is the last session message sequence number the vendor has acknowledged
    (the next launch sends only later messages); ``checkpoint_id`` the checkpoint it was started
    from (null: none). ``current`` is false when the record belongs to an earlier clear
    generation than the session's: ``/clear`` made it unusable and it is never resumed.
    """

    key: str
    vendor_session_id: str
    fingerprint: str
    cwd: str
    cursor: int
    clear_generation: int
    checkpoint_id: int | None
    last_used_at: datetime
    updated_at: datetime
    current: bool = True


class MessageOut(_Model):
    """A message of a session's transcript (``role``: ``user``, ``assistant``, ``guidance``...).

    ``adapter`` is the vendor that wrote an assistant message (answers from another provider
    are resent to a resumed vendor that has not seen them); ``run_id`` the run it belongs to.
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


class CheckpointOut(_Model):
    """A published compaction checkpoint: ``summary`` replaces messages ``first_seq``..``through_seq``."""

    id: int
    session_id: str
    clear_generation: int
    first_seq: int
    through_seq: int
    summary: str
    covered_chars: int
    created_at: datetime


class RecheckOut(_Model):
    """What the rules said about an approved call when they were checked again after the answer."""

    allowed: bool
    reason: str


class ApprovalOut(_Model):
    """An approval request.

    ``recheck`` (only in the answer to ``POST /approvals/{id}`` approving a call a run waits on):
    whether the call may go on after the rules were checked again; ``allowed: false`` when a rule
    or grant changed while the prompt was open denies it after all (the reason names it). None
    when nobody waits on the approval here or the re-check did not report in time.
    """

    id: str
    run_id: str | None
    session_id: str
    tool_id: str
    subject: str | None
    reason: str | None
    input: dict[str, Any]
    explanation: str | None
    status: str
    decided_by: str | None
    decision_reason: str | None
    created_at: datetime
    expires_at: datetime | None
    decided_at: datetime | None
    kind: str = "tool"
    questions: dict[str, Any] | None = None
    answers: dict[str, Any] | None = None
    grant_id: str | None = None
    vendor_request_id: str | None = None
    action_ids: list[str] = []
    recheck: RecheckOut | None = None
    decision: Literal["approve", "deny"] | None = Field(
        default=None,
        description="approve once approved; deny once denied, expired or cancelled; null while pending",
    )


class Remember(_Model):
    """With an approval: also create a scoped grant for similar calls ("remember").

    ``scope``: ``session`` (this session only), ``workspace`` (calls in this session's folder
    or below, any session) or ``everywhere``. ``match``: ``subject`` (default: only calls with
    this exact command or path) or ``tool`` (any call of the tool). ``ttl_seconds`` and
    ``max_uses`` bound the grant (None: no limit).
    """

    scope: Literal["session", "workspace", "everywhere"] = "session"
    match: Literal["subject", "tool"] = "subject"
    ttl_seconds: TtlSeconds | None = None
    max_uses: MaxUses | None = None


class ApprovalAnswer(_Model):
    """``POST /v1/approvals/{id}``: approve or deny; a questionnaire needs ``answers``.

    ``answers`` maps each question's exact text to the answer: one string (an option label or
    free text) or, for a multiple-selection question, a list of strings. ``run_now`` (with an
    approval of a recovery review): the call it reviews runs at once, even while a request of a
    reviewed action may still land (its input's ``waits_until``); without it, the call waits
    until then. Kept in the approval's ``answers`` as ``{"run_now": true}``.
    """

    decision: Literal["approve", "deny"]
    reason: str | None = None
    answers: dict[str, str | list[str]] | None = None
    remember: Remember | None = None
    run_now: bool = False


class RuleCreate(_Model):
    """``POST /v1/rules``: store a rule (``toolId(matcher)`` or a bare tool id, FACTS.md §3)."""

    level: Literal["allow", "ask", "deny"]
    rule: str = Field(min_length=1)


class RuleOut(_Model):
    """A stored rule."""

    id: str
    level: str
    rule: str
    created_by: str
    created_at: datetime


class GrantCreate(_Model):
    """``POST /v1/grants``: a scoped grant with conditions, expiry and a usage limit."""

    tool_id: Name = Field(min_length=1)
    level: Literal["allow", "ask", "deny"] = "allow"
    matcher: str | None = None
    session_id: Name | None = None
    workspace: FsPath | None = None
    ttl_seconds: TtlSeconds | None = None
    max_uses: MaxUses | None = None
    note: str | None = None


class GrantOut(_Model):
    """A scoped grant."""

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


class RulesOut(_Model):
    """``GET /v1/rules``: every source of the policy.

    ``configured`` is ``permissions.rules`` (or the built-in defaults when ``defaults`` is
    true); ``stored`` the rules added at runtime; ``grants`` the active scoped grants.
    """

    defaults: bool
    configured: dict[str, list[str]]
    stored: list[RuleOut]
    grants: list[GrantOut]
    flow_guard: str


class ExplainRequest(_Model):
    """``POST /v1/rules/explain``: which rule decides a given call, and why."""

    tool_id: Name = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    action: Name | None = None
    session_id: Name | None = None
    workspace: FsPath | None = None


class SpaceCreate(_Model):
    """``POST /v1/spaces``."""

    name: Name = Field(min_length=1)


class MemberSet(_Model):
    """``PUT /v1/spaces/{id}/members/{user}``."""

    role: Literal["owner", "editor", "commenter", "viewer", "guest"]


class SpaceOut(_Model):
    """A shared space and its members (name -> role)."""

    id: str
    name: str
    created_by: str
    created_at: datetime
    archived_at: datetime | None
    members: dict[str, str]


class ErrorOut(_Model):
    """Every error body: a stable code and a message saying what to do."""

    code: str
    message: str


class ValidationErrorOut(_Model):
    """FastAPI's 422 for a request that fails its declared schema: one ``detail`` item per problem
    (``loc`` where, ``msg`` what, ``type``; FastAPI's own keys, kept as it sends them)."""

    detail: list[dict[str, Any]]


#: The error answers every route may give, declared once on the application (so every route, also
#: one added later, documents them): the :class:`~octipusd.errors.OctipusError` statuses and the web
#: listener's refusals (:mod:`octipusd.web.access`) with :class:`ErrorOut`, and 422 either a request that fails its schema (:class:`ValidationErrorOut`)
#: or an adapter or executable the request cannot use (:class:`ErrorOut`).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {
        "model": ErrorOut,
        "description": "invalid_request: the message names the field and what is accepted",
    },
    401: {"model": ErrorOut, "description": "unauthorized (web listener): no valid token or session cookie"},
    403: {
        "model": ErrorOut,
        "description": "forbidden: the caller may not do this (a space's role; on the web listener a "
        "cross-site request or a missing CSRF token)",
    },
    404: {"model": ErrorOut, "description": "not_found: no such id or name"},
    409: {"model": ErrorOut, "description": "conflict: the current state does not allow it"},
    421: {
        "model": ErrorOut,
        "description": "forbidden_host (web listener): the Host header is not the page's",
    },
    422: {
        "model": ErrorOut | ValidationErrorOut,
        "description": "the request fails its schema (detail), or names an adapter or executable it cannot use",
    },
    502: {"model": ErrorOut, "description": "a connected MCP server failed the operation"},
    503: {"model": ErrorOut, "description": "a dependency (database, journal, connector) is unavailable"},
}


def _json_schema_of(response: dict[str, Any]) -> dict[str, Any]:
    model = response["model"]
    if isinstance(model, type):
        return {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"anyOf": [{"$ref": f"#/components/schemas/{m.__name__}"} for m in model.__args__]}


#: :data:`ERROR_RESPONSES` for a route whose success is not JSON (a ``response_class`` such as
#: ``PlainTextResponse``, which FastAPI would also give the declared errors): the same JSON bodies,
#: named by reference (the other routes put their models in the schema's components).
NON_JSON_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"description": r["description"], "content": {"application/json": {"schema": _json_schema_of(r)}}}
    for status, r in ERROR_RESPONSES.items()
}


# ----------------------------------------------------------------------------- work plans and feedback

#: Characters of one feedback text or reply at most (the store's limit, also checked here).
FEEDBACK_TEXT_MAX_CHARS = 4000
#: Characters of a step id or an author name at most.
FEEDBACK_NAME_MAX_CHARS = 200


class FeedbackCreate(_Model):
    """``POST /v1/sessions/{id}/plan/feedback``: a person's feedback on the session's work plan.

    ``step_id`` names a step of the current plan the feedback is about (omitted: the whole plan);
    ``author`` the space member giving it (default: the daemon's user).
    """

    text: str = Field(min_length=1, max_length=FEEDBACK_TEXT_MAX_CHARS)
    step_id: str | None = Field(default=None, min_length=1, max_length=FEEDBACK_NAME_MAX_CHARS)
    author: str | None = Field(default=None, min_length=1, max_length=FEEDBACK_NAME_MAX_CHARS)


class FeedbackReplyCreate(_Model):
    """``POST /v1/sessions/{id}/plan/feedback/{feedback_id}/reply``: a person's answer to the agent's
    note (typically its question on a ``needs_clarification`` item); it reopens the item."""

    text: str = Field(min_length=1, max_length=FEEDBACK_TEXT_MAX_CHARS)
    author: str | None = Field(default=None, min_length=1, max_length=FEEDBACK_NAME_MAX_CHARS)


class FeedbackReplyOut(_Model):
    """One reply; ``answering`` is the agent's note it answered (null: none)."""

    text: str
    author: str
    created_at: datetime
    answering: str | None


class FeedbackOut(_Model):
    """One item of a plan's feedback history.

    ``status``: ``pending`` (not handled yet, or reopened by a reply), ``applied`` or
    ``needs_clarification`` (the agent asks: see ``response``; reply to answer). ``plan_revision``
    is the plan revision it was given at; ``responded_revision`` the revision the agent's answer was
    saved with.
    """

    id: str
    session_id: str
    seq: int
    text: str
    step_id: str | None
    author: str
    plan_revision: int
    status: Literal["pending", "applied", "needs_clarification"]
    response: str | None
    responded_at: datetime | None
    responded_revision: int | None
    replies: list[FeedbackReplyOut]
    created_at: datetime
    updated_at: datetime


class PlanOut(_Model):
    """``GET /v1/sessions/{id}/plan``: the session's work plan (null: none yet), its revision (0: no
    plan), when it was last saved, and its complete feedback history, oldest first."""

    session_id: str
    plan: dict[str, Any] | None
    revision: int
    updated_at: datetime | None
    feedback: list[FeedbackOut]


#: What the orphan reaper does (or would do) with one worktree.


class WorktreeOut(_Model):
    """``GET /v1/worktrees``: one recorded child worktree (``~/.octipus/worktrees/<id>``).

    ``state``: ``live`` (its owner process is alive), ``left`` (its owner is gone: a crash left it,
    or its child is finishing), ``kept`` (the worktree was removed and ``kept_ref`` holds unmerged
    work for review). ``reaper_action`` and ``reaper_reason``: what the orphan reaper would do with
    it now and why (decided without changing anything; it sweeps only while
    ``swarm.worktreeIsolation`` is on).
    """

    id: str
    branch: str
    path: str
    project: str
    base_sha: str
    exists: bool
    owner_pid: int | None
    owner_alive: bool
    state: Literal["live", "left", "kept"]
    kept_ref: str | None
    reaper_action: ReapActionName
    reaper_reason: str


class WorktreeMergeOut(_Model):
    """``POST /v1/worktrees/{id}/merge``: the outcome (``merged``; ``conflict``: aborted, branch kept;
    ``skipped_detached``/``skipped_dirty``/``skipped_moved``: the project is not safe to merge into;
    ``failed``; ``no_changes``: nothing was left to merge) and its detail."""

    id: str
    outcome: Literal[
        "merged", "conflict", "failed", "no_changes", "skipped_detached", "skipped_dirty", "skipped_moved"
    ]
    detail: str


class WorktreeDiscard(_Model):
    """``POST /v1/worktrees/{id}/discard``: ``confirm`` must be true: it deletes unmerged work."""

    confirm: bool = False


class WorktreeDiscardOut(_Model):
    """What a discard deleted: each ref with the commit it pointed at, and whether the (clean)
    worktree directory was removed."""

    id: str
    deleted: dict[str, str]
    worktree_removed: bool
    detail: str


Health.model_rebuild()  # its worktree_reaper is defined below it
