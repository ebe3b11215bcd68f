"""``get_work_plan`` and ``update_work_plan``: the session's durable work plan.

Seed 003 ("Plans, feedback and delegation"): a CLI root receives these two tools; its plan
appears in the same web/TUI view as a native root's plan. ``get_work_plan`` bypasses the
worker queue. ``update_work_plan`` replaces the plan with a validated one and saves it
through :meth:`ToolHost.save_work_plan`.

Plan shape (the tool's input is ``{"plan": PLAN}``)::

    {"title"?: str, "goal"?: str,
     "steps": [{"id": str, "title": str,
                "status": "pending" | "in_progress" | "completed" | "blocked",
                "notes"?: str}, ...]}
"""

from __future__ import annotations

from typing import Any

from octipusd.errors import InvalidRequestError
from octipusd.toolkit import RunIdentity, ToolHost, ToolResult, ToolSpec
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


async def _update_work_plan(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    reject_unknown(arguments, ("plan",))
    if "plan" not in arguments:
        raise InvalidRequestError("plan: required")
    plan = validate_work_plan(arguments["plan"])
    saved = await host.save_work_plan(identity, plan)
    return {"plan": saved}


GET_WORK_PLAN = ToolSpec(
    name="get_work_plan",
    description=(
        'Return this session\'s durable work plan as {"plan": PLAN | null}. Read-only; answers even '
        "while another Octipus tool call of yours is in progress."
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
        "Replace this session's work plan (shown to the user in Octipus). Send the whole plan: "
        '{"plan": {"title"?, "goal"?, "steps": [{"id", "title", "status": '
        'pending|in_progress|completed|blocked, "notes"?}]}}. Keep step ids stable across updates. '
        "Returns the plan as saved."
    ),
    input_schema={
        "type": "object",
        "properties": {"plan": PLAN_SCHEMA},
        "required": ["plan"],
        "additionalProperties": False,
    },
    handler=_update_work_plan,
    timeout_seconds=30.0,
    internal=True,
)
