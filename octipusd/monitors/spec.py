"""A monitor's limits and the checked form of ``monitor__create``'s arguments (FACTS.md §7).

Arguments::

    {"source": {"kind": "tool", "name": TOOL, "args": {...}}
             | {"kind": "event", "type": EVENT_TYPE, "fallback"?: {"name": TOOL, "args": {...}}}
             | {"kind": "time", "at": "2026-12-24T18:00:00Z"}
             | {"kind": "browser", ...},            # refused: not available in this Octipus
     "condition"?: {"path", "operator", "value"?},   # required for a tool source; none for time
     "intervalSeconds"?: 10..3600 (30), "deadlineSeconds"?: 30..604800 (1800),
     "continuation"?: what to do once it fires}

Event types (the owner's session's own events; events of other sessions, or of no session, are
never seen): ``pipeline_status`` (a pipeline of the session changed status: ``{"pipelineId",
"from", "to", "at"}``) and ``run_finished`` (a run of the session started after the monitor ended:
``{"runId", "status", "reason", "role", "stage", "at"}``). The condition, when given, is judged on
each event (the first one it matches fires); an optional read-only ``fallback`` tool is probed at
each check when no event matched, so a state reached without an event still fires.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from octipusd.errors import InvalidRequestError
from octipusd.monitors.conditions import Condition, parse_condition
from octipusd.monitors.probes import ProbeRegistry
from octipusd.toolkit.monitors import EVENT_TYPE_NAMES

__all__ = ["EVENT_TYPES", "MonitorLimits", "MonitorSpec", "parse_spec"]

#: The event types an event source may watch (see the module).
EVENT_TYPES: Final = EVENT_TYPE_NAMES
#: Characters of a continuation at most.
MAX_CONTINUATION_CHARS: Final = 20_000
_KINDS: Final = ("tool", "event", "time", "browser")


@dataclass(frozen=True)
class MonitorLimits:
    """The monitors' limits (FACTS.md §7), each in its unit.

    Attributes:
        min_interval_s, max_interval_s, default_interval_s: Seconds between two checks.
        min_deadline_s, max_deadline_s, default_deadline_s: Seconds from creation to the deadline.
        max_active_per_session: Monitors one session may have active (not ended) at once.
        list_limit: Monitors one list returns at most.
        events_per_check: Events an event source reads at one check at most.
        delivery_retry_s: Seconds between two tries of a delivery whose session was between turns
            (its run ending as the monitor steered it, or starting as it posted a turn).
        delivery_tries: Tries of one delivery before it is ``blocked``.
        looks_per_workflow: Looks (a check and its timer, about three engine records) one workflow
            makes before a fresh workflow continues the watch (:mod:`~octipusd.monitors.watch`): a
            monitor checking every 10 s for 7 days adds its records to short workflows, never to one
            a restart replays from its first of 60,000 checks.
    """

    min_interval_s: float = 10.0
    max_interval_s: float = 3600.0
    default_interval_s: float = 30.0
    min_deadline_s: float = 30.0
    max_deadline_s: float = 7 * 86_400.0
    default_deadline_s: float = 1800.0
    max_active_per_session: int = 20
    list_limit: int = 100
    events_per_check: int = 100
    delivery_retry_s: float = 1.0
    delivery_tries: int = 60
    looks_per_workflow: int = 100


@dataclass(frozen=True)
class MonitorSpec:
    """``monitor__create``'s arguments, checked (see the module).

    Attributes:
        source: The source as stored (tool arguments with their forced values).
        condition: The condition, or None.
        interval_s: Seconds between two checks.
        deadline_at: When it times out (a time source: its ``at``).
        continuation: What to do once it fires, or None.
    """

    source: dict[str, Any]
    condition: Condition | None
    interval_s: float
    deadline_at: datetime
    continuation: str | None


def _seconds(raw: dict[str, Any], key: str, low: float, high: float, default: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise InvalidRequestError(f"{key}: must be a number of seconds from {low:g} to {high:g}")
    return float(value)


def _at(value: Any, now: datetime, limits: MonitorLimits) -> datetime:
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is None:
        raise InvalidRequestError("source.at: must be an ISO 8601 time in UTC (2026-12-24T18:00:00Z)")
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    if not now <= moment <= now + timedelta(seconds=limits.max_deadline_s):
        raise InvalidRequestError(
            f"source.at: must be from now to {limits.max_deadline_s:g} s ahead (UTC); got {moment.isoformat()}"
        )
    return moment


def _source(
    raw: Any, probes: ProbeRegistry, now: datetime, limits: MonitorLimits
) -> tuple[dict[str, Any], datetime | None]:
    if not isinstance(raw, dict):
        raise InvalidRequestError(f"source: required, an object with a kind ({', '.join(_KINDS)})")
    kind = raw.get("kind")
    if kind == "browser":
        raise InvalidRequestError(
            "source.kind: browser sources are not available in this Octipus (it has no browser); "
            "watch a tool, an event or a time instead"
        )
    allowed = {"tool": ("name", "args"), "event": ("type", "fallback"), "time": ("at",)}.get(str(kind))
    if allowed is None:
        raise InvalidRequestError(f"source.kind: must be one of {', '.join(_KINDS)}")
    unknown = sorted(set(raw) - {"kind", *allowed})
    if unknown:
        raise InvalidRequestError(f"source.{unknown[0]}: unknown field of a {kind} source")
    if kind == "tool":
        name, args = probes.check(raw.get("name"), raw.get("args"))
        return {"kind": "tool", "name": name, "args": args}, None
    if kind == "time":
        at = _at(raw.get("at"), now, limits)
        return {"kind": "time", "at": at.isoformat()}, at
    if raw.get("type") not in EVENT_TYPES:
        raise InvalidRequestError(f"source.type: must be one of {', '.join(EVENT_TYPES)}")
    source: dict[str, Any] = {"kind": "event", "type": raw["type"]}
    fallback = raw.get("fallback")
    if fallback is not None:
        if not isinstance(fallback, dict) or set(fallback) - {"name", "args"}:
            raise InvalidRequestError("source.fallback: must be {name, args} of a read-only tool")
        name, args = probes.check(fallback.get("name"), fallback.get("args"), "source.fallback")
        source["fallback"] = {"name": name, "args": args}
    return source, None


def parse_spec(
    raw: dict[str, Any], probes: ProbeRegistry, now: datetime, limits: MonitorLimits
) -> MonitorSpec:
    """``monitor__create``'s arguments, checked (shape and meaning, naming the bad field).

    Raises:
        InvalidRequestError: a bad field (the browser source: "not available"; a mutation as a
            probe; an interval or deadline out of bounds...).
    """
    unknown = sorted(set(raw) - {"source", "condition", "intervalSeconds", "deadlineSeconds", "continuation"})
    if unknown:
        raise InvalidRequestError(f"{unknown[0]}: unknown field")
    source, at = _source(raw.get("source"), probes, now, limits)
    condition = parse_condition(raw["condition"]) if raw.get("condition") is not None else None
    if source["kind"] == "tool" and condition is None:
        raise InvalidRequestError("condition: required for a tool source ({path, operator, value})")
    if source["kind"] == "time" and condition is not None:
        raise InvalidRequestError("condition: a time source has none (it fires at its time)")
    interval = _seconds(
        raw, "intervalSeconds", limits.min_interval_s, limits.max_interval_s, limits.default_interval_s
    )
    if at is not None:
        if "deadlineSeconds" in raw:
            raise InvalidRequestError("deadlineSeconds: a time source fires at its time (source.at)")
        deadline = at
    else:
        span = _seconds(
            raw, "deadlineSeconds", limits.min_deadline_s, limits.max_deadline_s, limits.default_deadline_s
        )
        deadline = now + timedelta(seconds=span)
    continuation = raw.get("continuation")
    if continuation is not None and (
        not isinstance(continuation, str) or len(continuation) > MAX_CONTINUATION_CHARS
    ):
        raise InvalidRequestError(
            f"continuation: must be a string of at most {MAX_CONTINUATION_CHARS} characters"
        )
    return MonitorSpec(source, condition, interval, deadline, continuation or None)
