"""``get_work_plan`` and ``update_work_plan``: the session's durable work plan.

Seed 003 ("Plans, feedback and delegation"): a CLI root receives these two tools; its plan
appears in the same web/TUI view as a native root's plan. ``get_work_plan`` bypasses the
worker queue. ``update_work_plan`` replaces the plan with a validated one and saves it, with the
agent's answers to the person's feedback, through :meth:`ToolHost.save_work_plan`.

The tool's input (FACTS.md §8)::

    {"revision": int,            # the plan's revision as read (0 or absent: there is no plan yet);
                                 # a stale one is refused, naming the current revision
     "plan": PLAN,
     "feedbackResponses"?: [{"id": str, "status": "applied" | "needs_clarification",
                             "response"?: str}, ...]}

    PLAN = {"title"?: str, "goal"?: str,
            "steps": [{"id": str, "title": str,
                       "status": "pending" | "in_progress" | "completed" | "blocked",
                       "notes"?: str}, ...]}

A plan read back (``get_work_plan``, the run context) carries its ``revision`` beside its fields.
"""

from __future__ import annotations

from typing import Any

from octipusd.errors import InvalidRequestError
from octipusd.store.plan_store import MAX_FEEDBACK_ENTRIES
from octipusd.toolkit import (
    FeedbackResponse,
    FeedbackStatus,
    PlanUpdate,
    RunIdentity,
    ToolHost,
    ToolResult,
    ToolSpec,
)
from octipusd.tools.base import optional_str, reject_unknown, require_str

#: Allowed step statuses.
STEP_STATUSES: tuple[str, ...] = ("pending", "in_progress", "completed", "blocked")

#: Upper bounds that keep a plan a plan (not a data dump).
MAX_STEPS = 200
MAX_TEXT_CHARS = 4000

_STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "Stable step id (keep it when the step is updated)."},
        "title": {"type": "string"},
        "status": {"type": "string", "enum": list(STEP_STATUSES)},
        "notes": {"type": "string"},
    },
    "required": ["id", "title", "status"],
    "additionalProperties": False,
}

PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "goal": {"type": "string"},
        "steps": {"type": "array", "items": _STEP_SCHEMA, "maxItems": MAX_STEPS},
    },
    "required": ["steps"],
    "additionalProperties": False,
}


def _bounded(value: str, path: str) -> str:
    if len(value) > MAX_TEXT_CHARS:
        raise InvalidRequestError(f"{path}: longer than {MAX_TEXT_CHARS} characters")
    return value


def validate_work_plan(plan: Any) -> dict[str, Any]:
    """Validate a work plan and return its normalized copy.

    Args:
        plan: The ``plan`` argument as received.

    Returns:
        A new dict with ``title``/``goal`` only when given, and ``steps`` as a list of
        ``{id, title, status[, notes]}``.

    Raises:
        InvalidRequestError: naming the first bad field, e.g. ``plan.steps[2].status: must be
            one of pending, in_progress, completed, blocked``.
    """
    if not isinstance(plan, dict):
        raise InvalidRequestError(f"plan: must be an object, got {type(plan).__name__}")
    if "revision" in plan:
        raise InvalidRequestError(
            "plan.revision: send the revision as update_work_plan's own revision argument, beside plan"
        )
    reject_unknown(plan, ("title", "goal", "steps"), "plan")
    normalized: dict[str, Any] = {}
    for key in ("title", "goal"):
        value = optional_str(plan, key, "plan")
        if value is not None:
            normalized[key] = _bounded(value, f"plan.{key}")
    if "steps" not in plan:
        raise InvalidRequestError("plan.steps: required (a list of steps, may be empty)")
    steps = plan["steps"]
    if not isinstance(steps, list):
        raise InvalidRequestError(f"plan.steps: must be a list, got {type(steps).__name__}")
    if len(steps) > MAX_STEPS:
        raise InvalidRequestError(f"plan.steps: at most {MAX_STEPS} steps, got {len(steps)}")
    seen_ids: set[str] = set()
    normalized_steps: list[dict[str, Any]] = []
    for index, step in enumerate(steps):
        where = f"plan.steps[{index}]"
        if not isinstance(step, dict):
            raise InvalidRequestError(f"{where}: must be an object, got {type(step).__name__}")
        reject_unknown(step, ("id", "title", "status", "notes"), where)
        step_id = _bounded(require_str(step, "id", where), f"{where}.id")
        if step_id in seen_ids:
            raise InvalidRequestError(f"{where}.id: duplicate step id {step_id!r}")
        seen_ids.add(step_id)
        title = _bounded(require_str(step, "title", where), f"{where}.title")
        status = require_str(step, "status", where)
        if status not in STEP_STATUSES:
            raise InvalidRequestError(
                f"{where}.status: must be one of {', '.join(STEP_STATUSES)}, got {status!r}"
            )
        entry: dict[str, Any] = {"id": step_id, "title": title, "status": status}
        notes = optional_str(step, "notes", where)
        if notes is not None:
            entry["notes"] = _bounded(notes, f"{where}.notes")
        normalized_steps.append(entry)
    normalized["steps"] = normalized_steps
    return normalized


async def _get_work_plan(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    reject_unknown(arguments, ())
    return {"plan": await host.get_work_plan(identity)}


#: The statuses an agent answers feedback with.
ANSWER_STATUSES: tuple[str, ...] = (FeedbackStatus.APPLIED.value, FeedbackStatus.NEEDS_CLARIFICATION.value)

_RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "The feedback item's id (from get_cli_run_context)."},
        "status": {"type": "string", "enum": list(ANSWER_STATUSES)},
        "response": {
            "type": "string",
            "description": "What you did, or what you need the person to clarify.",
        },
    },
    "required": ["id", "status"],
    "additionalProperties": False,
}


def validate_revision(value: Any) -> int:
    """The ``revision`` argument: a whole number, 0 or more (absent: 0).

    Raises:
        InvalidRequestError: ``revision: must be ...``.
    """
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidRequestError(f"revision: must be a whole number, 0 or more, got {value!r}")
    return value


def validate_feedback_responses(value: Any) -> tuple[FeedbackResponse, ...]:
    """The ``feedbackResponses`` argument (absent: none).

    Raises:
        InvalidRequestError: naming the first bad field, e.g. ``feedbackResponses[0].status: must be
            one of applied, needs_clarification, got 'done'``.
    """
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidRequestError(f"feedbackResponses: must be a list, got {type(value).__name__}")
    if len(value) > MAX_FEEDBACK_ENTRIES:
        raise InvalidRequestError(f"feedbackResponses: at most {MAX_FEEDBACK_ENTRIES}, got {len(value)}")
    answers: list[FeedbackResponse] = []
    for index, raw in enumerate(value):
        where = f"feedbackResponses[{index}]"
        if not isinstance(raw, dict):
            raise InvalidRequestError(f"{where}: must be an object, got {type(raw).__name__}")
        reject_unknown(raw, ("id", "status", "response"), where)
        item_id = require_str(raw, "id", where)
        if any(a.id == item_id for a in answers):
            raise InvalidRequestError(f"{where}.id: feedback {item_id!r} is answered twice")
        status = require_str(raw, "status", where)
        if status not in ANSWER_STATUSES:
            raise InvalidRequestError(
                f"{where}.status: must be one of {', '.join(ANSWER_STATUSES)}, got {status!r}"
            )
        answers.append(
            FeedbackResponse(item_id, FeedbackStatus(status), optional_str(raw, "response", where))
        )
    return tuple(answers)


async def _update_work_plan(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    reject_unknown(arguments, ("revision", "plan", "feedbackResponses"))
    if "plan" not in arguments:
        raise InvalidRequestError("plan: required")
    update = PlanUpdate(
        plan=validate_work_plan(arguments["plan"]),
        revision=validate_revision(arguments.get("revision")),
        responses=validate_feedback_responses(arguments.get("feedbackResponses")),
    )
    saved = await host.save_work_plan(identity, update)
    return {"plan": saved}


GET_WORK_PLAN = ToolSpec(
    name="get_work_plan",
    description=(
        'Return this session\'s durable work plan as {"plan": PLAN | null}; the plan carries its '
        '"revision", which update_work_plan needs. Read-only; answers even while another Octipus tool '
        "call of yours is in progress."
    ),
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    handler=_get_work_plan,
    read_only=True,
    bypass_queue=True,
    timeout_seconds=15.0,
)

UPDATE_WORK_PLAN = ToolSpec(
    name="update_work_plan",
    description=(
        "Replace this session's work plan (shown to the user in Octipus). Send the whole plan and the "
        'revision you read: {"revision": N, "plan": {"title"?, "goal"?, "steps": [{"id", "title", '
        '"status": pending|in_progress|completed|blocked, "notes"?}]}, "feedbackResponses"?: [{"id", '
        '"status": applied|needs_clarification, "response"?}]}. revision is 0 (or absent) only while '
        "there is no plan; a stale revision is refused: read the plan again. Answer the person's pending "
        "feedback (get_cli_run_context) in feedbackResponses: applied once done, needs_clarification "
        "with your question in response. Keep step ids stable across updates. Returns the plan as saved, "
        "with its new revision."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "revision": {
                "type": "integer",
                "minimum": 0,
                "description": "The plan's revision as you read it.",
            },
            "plan": PLAN_SCHEMA,
            "feedbackResponses": {
                "type": "array",
                "items": _RESPONSE_SCHEMA,
                "maxItems": MAX_FEEDBACK_ENTRIES,
            },
        },
        "required": ["plan"],
        "additionalProperties": False,
    },
    handler=_update_work_plan,
    timeout_seconds=30.0,
    internal=True,
)
