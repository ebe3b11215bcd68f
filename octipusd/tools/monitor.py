"""The monitor tools of a root run's bridge (FACTS.md §7): ``monitor__create``, ``monitor__list``,
``monitor__pause``, ``monitor__resume``, ``monitor__cancel``.

Each calls one use case of the monitors' service through
:meth:`~octipusd.toolkit.ToolHost.monitor_access`, which binds the calling run's user, session and
workspace as the caller: a monitor wakes the session that created it, and an agent acts only on its
own session's monitors. They are a root run's: a child or a pipeline's stage worker never gets them
and is refused if it calls one. Like the pipeline tools they are *internal* orchestration tools
(their whole effect is Octipus's own monitor record), not journaled actions. The service checks
the arguments once (naming the bad field): a mutation as a probe, ``resume_pipeline`` among them, is
refused; ``get_pipeline_status`` is probed with ``includeHistory: false``; a browser source answers
that it is not available in this Octipus.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from octipusd.errors import ForbiddenError, InvalidRequestError
from octipusd.toolkit import MonitorAccess, RunIdentity, ToolHost, ToolResult, ToolSpec
from octipusd.toolkit.monitors import EVENT_TYPE_NAMES
from octipusd.tools.base import reject_unknown, require_str

__all__ = ["MONITOR_TOOLS"]

#: Seconds a monitor tool may take (each answers once its record is written).
MONITOR_TOOL_TIMEOUT_S: Final = 60.0
#: Characters of a monitor's id at most.
MAX_ID_CHARS: Final = 200

_ID_SCHEMA: dict[str, Any] = {"type": "string", "description": "The monitor's id (monitor__create's handle)."}
_TOOL_REF: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "args": {"type": "object"}},
    "required": ["name"],
}


def _access(identity: RunIdentity, host: ToolHost) -> MonitorAccess:
    """The monitors' service with the calling root run as the caller.

    Raises:
        ForbiddenError: A pipeline's stage worker or a child calls (a monitor wakes a root's session).
    """
    if identity.stage is not None:
        raise ForbiddenError(
            f"the monitor tools are a root run's; stage {identity.stage.stage!r} of pipeline "
            f"{identity.stage.pipeline_id} may not create or steer monitors"
        )
    return host.monitor_access(identity)


def _monitor_id(arguments: Mapping[str, Any]) -> str:
    value = require_str(arguments, "id")
    if len(value) > MAX_ID_CHARS:
        raise InvalidRequestError(f"id: longer than {MAX_ID_CHARS} characters")
    return value


async def _create(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    access = _access(identity, host)
    return await access.ops.create(dict(arguments), access.caller)


async def _list(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    reject_unknown(arguments, ("activeOnly",))
    active = arguments.get("activeOnly", False)
    if not isinstance(active, bool):
        raise InvalidRequestError("activeOnly: must be true or false")
    access = _access(identity, host)
    return {"monitors": await access.ops.list(access.caller, active_only=active)}


async def _pause(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    reject_unknown(arguments, ("id",))
    access = _access(identity, host)
    return await access.ops.pause(_monitor_id(arguments), access.caller)


async def _resume(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    reject_unknown(arguments, ("id",))
    access = _access(identity, host)
    return await access.ops.resume(_monitor_id(arguments), access.caller)


async def _cancel(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    reject_unknown(arguments, ("id",))
    access = _access(identity, host)
    return await access.ops.cancel(_monitor_id(arguments), access.caller)


def _by_id(name: str, description: str, handler: Any) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        input_schema={
            "type": "object",
            "properties": {"id": _ID_SCHEMA},
            "required": ["id"],
            "additionalProperties": False,
        },
        handler=handler,
        timeout_seconds=MONITOR_TOOL_TIMEOUT_S,
        internal=True,
    )


MONITOR_CREATE = ToolSpec(
    name="monitor__create",
    description=(
        "Watch something in the background and wake this session once, then end your turn. "
        'source: {"kind": "tool", "name", "args"} (a read-only tool, e.g. get_pipeline_status {"id"}; '
        "never a mutation such as resume_pipeline), "
        f'{{"kind": "event", "type": {" | ".join(EVENT_TYPE_NAMES)}, "fallback"?: {{"name", "args"}}}} '
        "(this session's events), or "
        '{"kind": "time", "at": ISO-8601 UTC}. condition {"path": dotted path ("" = whole result), '
        '"operator": equals | in | contains | changed, "value"} (required for a tool). '
        "intervalSeconds 10-3600 (30), deadlineSeconds 30-604800 (1800); at the deadline the session is "
        "woken with the last observation. continuation: what to do when it fires. On a match the session "
        "is woken with the match and a fresh observation (steered into your turn if you are busy, else a "
        'new turn). E.g. {"source": {"kind": "tool", "name": "get_pipeline_status", "args": {"id": ID}}, '
        '"condition": {"path": "status", "operator": "in", "value": ["completed", "failed", "paused", '
        '"stopped", "awaiting_approval"]}}. At most 20 active monitors per session.'
    ),
    input_schema={
        "type": "object",
        "properties": {
            "source": {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": ["tool", "event", "time", "browser"]},
                    "name": {"type": "string"},
                    "args": {"type": "object"},
                    "type": {"type": "string", "enum": list(EVENT_TYPE_NAMES)},
                    "fallback": _TOOL_REF,
                    "at": {"type": "string"},
                },
                "required": ["kind"],
            },
            "condition": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "operator": {"type": "string", "enum": ["equals", "in", "contains", "changed"]},
                    "value": {},
                },
                "required": ["operator"],
            },
            "intervalSeconds": {"type": "number"},
            "deadlineSeconds": {"type": "number"},
            "continuation": {"type": "string"},
        },
        "required": ["source"],
        "additionalProperties": False,
    },
    handler=_create,
    timeout_seconds=MONITOR_TOOL_TIMEOUT_S,
    internal=True,
)

MONITOR_LIST = ToolSpec(
    name="monitor__list",
    description=(
        "List this session's monitors, newest first: status (armed, paused, ready, delivering, "
        "completed, cancelled, timed_out, blocked), source, condition, deadline, last observation. "
        "activeOnly: only those not ended."
    ),
    input_schema={
        "type": "object",
        "properties": {"activeOnly": {"type": "boolean"}},
        "additionalProperties": False,
    },
    handler=_list,
    read_only=True,
    timeout_seconds=MONITOR_TOOL_TIMEOUT_S,
    internal=True,
)

MONITOR_PAUSE = _by_id(
    "monitor__pause", "Pause an armed monitor: it stops checking; its deadline does not move.", _pause
)
MONITOR_RESUME = _by_id("monitor__resume", "Arm a paused monitor again (same deadline).", _resume)
MONITOR_CANCEL = _by_id("monitor__cancel", "Cancel a monitor that has not been delivered.", _cancel)

#: The monitor tools of a root run, in the order they are listed.
MONITOR_TOOLS: tuple[ToolSpec, ...] = (
    MONITOR_CREATE,
    MONITOR_LIST,
    MONITOR_PAUSE,
    MONITOR_RESUME,
    MONITOR_CANCEL,
)
