"""The pipeline tools of a root run's bridge, named as seed 003 names them.

``create_pipeline``, ``get_pipeline_status({id, includeHistory})``, ``resume_pipeline({id,
fromStage?, skipItems?, evidence?})``, ``stop_pipeline({id})``, ``update_pipeline_items({id, skip,
add: [{title, detail, acceptance}], order, evidence})`` and ``answer_pipeline_approval({id})`` (the
pending approval forwarded to the person in the conversation; up to five minutes for their answer). Each checks its arguments' shape (naming the
bad field), then calls one use case of the pipelines' service through
:meth:`~octipusd.toolkit.ToolHost.pipeline_access`, which binds the calling run's user, session and
workspace as the caller: an agent acts only on its own session's pipelines (the owner may use them
from a later root turn of the same session and workspace; another session or user is refused). They
are a root run's: a pipeline's stage worker never gets them and is refused (403) if it calls one.

``get_pipeline_status`` is read-only and bypasses the worker's call queue (like ``get_work_plan``): it
answers while another call of the worker runs, and gives up after the service's 15 s when storage
cannot answer (an error, never a guess).

The mutating ones are *internal* orchestration tools (like ``spawn_child``), not journaled actions:
their whole effect is Octipus's own pipeline record, written in one locked transaction each (two
resumes cannot both claim a walk; an edit is queued atomically), and the paid work they start runs
as stage-worker runs that journal their own calls. A journal ``started`` record for them would be a
duplicate outer record (seed 000), and after a crash a recovery review would block the session for
an effect the pipelines' own restart reconciliation already settles (interrupted pipelines are
parked ``paused``, never re-run). Being internal they also stay available while a recovery review
is open, so an agent can still stop a pipeline then.

``plan__add_items({items})`` is a stage worker's (:data:`STAGE_TOOLS`): it adds items to the plan of
the pipeline its run's identity names (``RunIdentity.stage``), leaving out titles already on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from octipusd.errors import ForbiddenError, InvalidRequestError
from octipusd.toolkit import (
    CreateRequest,
    ItemChanges,
    ItemDraft,
    PipelineAccess,
    ResumeRequest,
    RunIdentity,
    ToolHost,
    ToolResult,
    ToolSpec,
)
from octipusd.toolkit.pipelines import MAX_ITEM_TEXT_CHARS, MAX_PIPELINE_ITEMS
from octipusd.tools.base import optional_str, reject_unknown, require_str

__all__ = [
    "ANSWER_PIPELINE_APPROVAL",
    "CREATE_PIPELINE",
    "GET_PIPELINE_STATUS",
    "PIPELINE_TOOLS",
    "PLAN_ADD_ITEMS",
    "RESUME_PIPELINE",
    "STAGE_TOOLS",
    "STOP_PIPELINE",
    "UPDATE_PIPELINE_ITEMS",
    "parse_item_drafts",
    "parse_item_ids",
]

#: Characters of an id, a stage name or a template name at most.
MAX_NAME_CHARS: Final = 200
#: Seconds ``get_pipeline_status`` may take: the service's 15 s storage deadline, plus a margin so
#: its own error (naming the timeout) is what the agent reads.
STATUS_TOOL_TIMEOUT_S: Final = 20.0
#: Seconds the other pipeline tools may take (they answer once their record is written).
MUTATION_TOOL_TIMEOUT_S: Final = 60.0
#: Seconds ``answer_pipeline_approval`` may take: the five minutes it waits for the person
#: (:class:`~octipusd.pipelines.answering.AnswerLimits`), plus a margin so its own answer
#: (``decided: false``) is what the agent reads.
ANSWER_TOOL_TIMEOUT_S: Final = 330.0

_ITEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "detail": {"type": "string"},
        "acceptance": {"type": "string", "description": "How to tell the item is done."},
    },
    "required": ["title"],
    "additionalProperties": False,
}
_IDS_SCHEMA: dict[str, Any] = {"type": "array", "items": {"type": "string"}, "maxItems": MAX_PIPELINE_ITEMS}
_ID_SCHEMA: dict[str, Any] = {
    "type": "string",
    "description": "The pipeline's id (create_pipeline's handle).",
}


def _bounded(value: str, path: str, limit: int) -> str:
    if len(value) > limit:
        raise InvalidRequestError(f"{path}: longer than {limit} characters")
    return value


def _pipeline_id(arguments: Mapping[str, Any]) -> str:
    return _bounded(require_str(arguments, "id"), "id", MAX_NAME_CHARS)


def _text(arguments: Mapping[str, Any], key: str, limit: int = MAX_ITEM_TEXT_CHARS) -> str | None:
    value = optional_str(arguments, key)
    return _bounded(value, key, limit) if value is not None else None


def parse_item_ids(value: Any, where: str) -> tuple[str, ...]:
    """A list of item ids (absent: none).

    Raises:
        InvalidRequestError: naming ``where`` (and the index) when it is not a list of non-empty strings.
    """
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidRequestError(f"{where}: must be a list of item ids, got {type(value).__name__}")
    if len(value) > MAX_PIPELINE_ITEMS:
        raise InvalidRequestError(f"{where}: at most {MAX_PIPELINE_ITEMS} ids, got {len(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item.strip() or len(item) > MAX_NAME_CHARS:
            raise InvalidRequestError(f"{where}[{index}]: must be an item id (a non-empty string)")
    return tuple(value)


def parse_item_drafts(value: Any, where: str) -> tuple[ItemDraft, ...]:
    """A list of ``{title, detail?, acceptance?}`` (absent: none), each checked.

    Raises:
        InvalidRequestError: naming ``where[i].field``.
    """
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidRequestError(f"{where}: must be a list of items, got {type(value).__name__}")
    if len(value) > MAX_PIPELINE_ITEMS:
        raise InvalidRequestError(f"{where}: at most {MAX_PIPELINE_ITEMS} items, got {len(value)}")
    drafts: list[ItemDraft] = []
    for index, raw in enumerate(value):
        path = f"{where}[{index}]"
        if not isinstance(raw, dict):
            raise InvalidRequestError(f"{path}: must be an object with a title, got {type(raw).__name__}")
        reject_unknown(raw, ("title", "detail", "acceptance"), path)
        draft = ItemDraft(
            require_str(raw, "title", path),
            optional_str(raw, "detail", path),
            optional_str(raw, "acceptance", path),
        )
        drafts.append(draft.checked(path))
    return tuple(drafts)


def _include_history(arguments: Mapping[str, Any]) -> bool:
    value = arguments.get("includeHistory", True)
    if not isinstance(value, bool):
        raise InvalidRequestError(f"includeHistory: must be true or false, got {type(value).__name__}")
    return value


def _template(arguments: Mapping[str, Any]) -> str | dict[str, Any]:
    if "template" not in arguments:
        raise InvalidRequestError("template: required (a template's name or id, or a template document)")
    value = arguments["template"]
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequestError(
            "template: must be a template's name or id, or a template document (an object)"
        )
    return _bounded(value, "template", MAX_NAME_CHARS)


def _params(arguments: Mapping[str, Any]) -> dict[str, Any]:
    value = arguments.get("params")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequestError(
            f"params: must be an object of parameter values, got {type(value).__name__}"
        )
    return value


def _root_access(identity: RunIdentity, host: ToolHost) -> PipelineAccess:
    """The pipelines' service with the calling root run as the caller.

    Raises:
        ForbiddenError: The caller is a pipeline's stage worker (a stage neither starts, steers nor
            reads pipelines: one pipeline must not start others without bound, or stop itself).
    """
    if identity.stage is not None:
        raise ForbiddenError(
            f"the pipeline tools are a root run's; stage {identity.stage.stage!r} of pipeline "
            f"{identity.stage.pipeline_id} may only add plan items (plan__add_items)"
        )
    return host.pipeline_access(identity)


async def _create(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    reject_unknown(arguments, ("template", "params", "description", "items"))
    access = _root_access(identity, host)
    request = CreateRequest(
        template=_template(arguments),
        params=_params(arguments),
        session_id=identity.session_id,
        description=_text(arguments, "description"),
        items=parse_item_drafts(arguments.get("items"), "items"),
    )
    return await access.ops.create(request, access.caller)


async def _status(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    reject_unknown(arguments, ("id", "includeHistory"))
    pipeline_id, history = _pipeline_id(arguments), _include_history(arguments)
    access = _root_access(identity, host)
    return await access.ops.status(pipeline_id, access.caller, include_history=history)


async def _resume(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    reject_unknown(arguments, ("id", "fromStage", "skipItems", "evidence"))
    pipeline_id = _pipeline_id(arguments)
    request = ResumeRequest(
        from_stage=_text(arguments, "fromStage", MAX_NAME_CHARS),
        skip_items=parse_item_ids(arguments.get("skipItems"), "skipItems"),
        evidence=_text(arguments, "evidence"),
    )
    access = _root_access(identity, host)
    return await access.ops.resume(pipeline_id, access.caller, request)


async def _stop(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    reject_unknown(arguments, ("id",))
    pipeline_id = _pipeline_id(arguments)
    access = _root_access(identity, host)
    return await access.ops.stop(pipeline_id, access.caller)


async def _update_items(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    reject_unknown(arguments, ("id", "skip", "add", "order", "evidence"))
    pipeline_id = _pipeline_id(arguments)
    changes = ItemChanges(
        skip=parse_item_ids(arguments.get("skip"), "skip"),
        add=parse_item_drafts(arguments.get("add"), "add"),
        order=parse_item_ids(arguments.get("order"), "order"),
        evidence=_text(arguments, "evidence"),
    )
    if not (changes.skip or changes.add or changes.order):
        raise InvalidRequestError("skip, add, order: give at least one change")
    access = _root_access(identity, host)
    return await access.ops.update_items(pipeline_id, access.caller, changes)


CREATE_PIPELINE = ToolSpec(
    name="create_pipeline",
    description=(
        "Start a pipeline: staged, checkpointed work that survives stops, failures and restarts. "
        '{"template": NAME_OR_ID | {steps, parameters}, "params"?: {key: value}, "description"?: '
        'what this run is for, "items"?: [{"title", "detail"?, "acceptance"?}]}. The template is looked '
        "up by exact name or id, then a close name, else a one-stage Execute pipeline doing the "
        'description. Saves the graph and initial checkpoint and returns a handle {"id", "status", ...}; '
        "follow it with get_pipeline_status, then collect its results and write your own answer."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "template": {
                "description": "A template's name or id, or a template document (steps and parameters).",
                "anyOf": [{"type": "string"}, {"type": "object"}],
            },
            "params": {"type": "object", "description": "Parameter values by key."},
            "description": {"type": "string", "description": "What this run is for ({{description}})."},
            "items": {"type": "array", "items": _ITEM_SCHEMA, "maxItems": MAX_PIPELINE_ITEMS},
        },
        "required": ["template"],
        "additionalProperties": False,
    },
    handler=_create,
    timeout_seconds=MUTATION_TOOL_TIMEOUT_S,
    internal=True,
)

GET_PIPELINE_STATUS = ToolSpec(
    name="get_pipeline_status",
    description=(
        "Return a pipeline's durable status: its status (planning, running, paused, awaiting_approval, "
        "completed, failed, stopped), stage results, remainingItems, each item's stages with results, "
        "retry reasons and decisions, incompleteAttempt (the text so far of an attempt a resume "
        "continues; never a stage's output) and history. Pass includeHistory: false when polling. "
        "Read-only; answers even while another Octipus tool call of yours is in progress."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "id": _ID_SCHEMA,
            "includeHistory": {
                "type": "boolean",
                "description": "Include the durable event history (default true).",
            },
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    handler=_status,
    read_only=True,
    bypass_queue=True,
    timeout_seconds=STATUS_TOOL_TIMEOUT_S,
)

RESUME_PIPELINE = ToolSpec(
    name="resume_pipeline",
    description=(
        'Resume a failed, stopped or paused pipeline; answers status "resuming" at once. fromStage (an '
        "exact stage name or node key among retained checkpoints) rewinds there: earlier outputs are "
        "reused, the interrupted stage runs again; omit it to continue from the latest checkpoint. "
        "skipItems marks items earlier work already delivered as skipped (every id is checked first; "
        "one unknown id skips nothing), with the commit and check in evidence. A pipeline that already "
        "ran a stage first waits for the person to approve its replay review (pendingApproval in the "
        "answer and the status; it may be denied); an unattended run's resume of one is refused."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "id": _ID_SCHEMA,
            "fromStage": {"type": "string"},
            "skipItems": _IDS_SCHEMA,
            "evidence": {"type": "string"},
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    handler=_resume,
    timeout_seconds=MUTATION_TOOL_TIMEOUT_S,
    internal=True,
)

STOP_PIPELINE = ToolSpec(
    name="stop_pipeline",
    description=(
        "Stop a pipeline's current stage; it is saved resumable as stopped (distinct from failed): "
        "resume_pipeline continues it."
    ),
    input_schema={
        "type": "object",
        "properties": {"id": _ID_SCHEMA},
        "required": ["id"],
        "additionalProperties": False,
    },
    handler=_stop,
    timeout_seconds=MUTATION_TOOL_TIMEOUT_S,
    internal=True,
)

UPDATE_PIPELINE_ITEMS = ToolSpec(
    name="update_pipeline_items",
    description=(
        "Change a pipeline's plan items at the next item boundary, atomically: skip [itemId], add "
        "[{title, detail?, acceptance?}] (appended), order [itemId] (listed items first, then the "
        "others), evidence for the skips. Edits to a stopped or paused pipeline apply before its "
        "resume; completed items keep their results. Stop the pipeline before skipping its active item."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "id": _ID_SCHEMA,
            "skip": _IDS_SCHEMA,
            "add": {"type": "array", "items": _ITEM_SCHEMA, "maxItems": MAX_PIPELINE_ITEMS},
            "order": _IDS_SCHEMA,
            "evidence": {"type": "string"},
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    handler=_update_items,
    timeout_seconds=MUTATION_TOOL_TIMEOUT_S,
    internal=True,
)


async def _add_plan_items(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    reject_unknown(arguments, ("items",))
    if "items" not in arguments:
        raise InvalidRequestError("items: required (a list of {title, detail?, acceptance?})")
    drafts = parse_item_drafts(arguments["items"], "items")
    if identity.stage is None:
        raise InvalidRequestError(
            "plan__add_items: only a pipeline's stage worker adds items to its plan; "
            "use update_pipeline_items with the pipeline's id"
        )
    access = host.pipeline_access(identity)
    stage = identity.stage
    return await access.ops.add_plan_items(stage.pipeline_id, access.caller, drafts, node_key=stage.node_key)


PLAN_ADD_ITEMS = ToolSpec(
    name="plan__add_items",
    description=(
        "Add items to the plan of the pipeline this stage works for: "
        '{"items": [{"title", "detail"?, "acceptance"?}]}. An item whose title is already on the plan '
        'is left out. Returns {"added": [{"id", "title"}], "skipped": [title]}.'
    ),
    input_schema={
        "type": "object",
        "properties": {"items": {"type": "array", "items": _ITEM_SCHEMA, "maxItems": MAX_PIPELINE_ITEMS}},
        "required": ["items"],
        "additionalProperties": False,
    },
    handler=_add_plan_items,
    timeout_seconds=MUTATION_TOOL_TIMEOUT_S,
    internal=True,
)

#: The tools only a pipeline's stage worker has (its identity names the pipeline).
STAGE_TOOLS: tuple[ToolSpec, ...] = (PLAN_ADD_ITEMS,)


#: The pipeline tools of a root run, in the order they are listed.
async def _answer_approval(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    reject_unknown(arguments, ("id",))
    pipeline_id = _pipeline_id(arguments)
    access = _root_access(identity, host)
    return await access.ops.answer_approval(pipeline_id, access.caller)


ANSWER_PIPELINE_APPROVAL = ToolSpec(
    name="answer_pipeline_approval",
    description=(
        "Ask the person in this conversation to answer a pipeline's pending approval (its "
        "pendingApproval: a stage's blocked call or question). The person decides; this waits up to "
        'five minutes for their explicit answer and returns {"decided": true, "decision", "command", '
        '"requestId", "decidedBy", "decidedAt"}, or {"decided": false} with the approval still pending '
        "(never a denial). An approval resumes the stage."
    ),
    input_schema={
        "type": "object",
        "properties": {"id": _ID_SCHEMA},
        "required": ["id"],
        "additionalProperties": False,
    },
    handler=_answer_approval,
    timeout_seconds=ANSWER_TOOL_TIMEOUT_S,
    internal=True,
)

PIPELINE_TOOLS: tuple[ToolSpec, ...] = (
    CREATE_PIPELINE,
    GET_PIPELINE_STATUS,
    RESUME_PIPELINE,
    STOP_PIPELINE,
    UPDATE_PIPELINE_ITEMS,
    ANSWER_PIPELINE_APPROVAL,
)
