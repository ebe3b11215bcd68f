"""A monitor's public record as the store returns it (FACTS.md §7): a frozen value.

A monitor watches a source for its owner's session (the session, user and workspace of the root run
that created it) and wakes that session once. Its lifecycle is ``armed -> ready -> delivering ->
completed``; ``paused`` is an armed monitor a person or the agent paused (its deadline does not
move); ``timed_out`` one whose deadline passed (the session was woken with the last observation);
``cancelled`` one cancelled before it fired; ``blocked`` one whose delivery was cut off (the daemon
died mid-delivery: it needs a person's review and is never delivered again).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

__all__ = ["Monitor", "MonitorStatus"]


class MonitorStatus(StrEnum):
    """A monitor's status (FACTS.md §7 "Lifecycle")."""

    ARMED = "armed"
    PAUSED = "paused"
    READY = "ready"
    DELIVERING = "delivering"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    BLOCKED = "blocked"

    @property
    def active(self) -> bool:
        """True until it ended (``armed``, ``paused``, ``ready``, ``delivering``): it counts against
        the session's limit and keeps the durable engine running."""
        return self in _ACTIVE


_ACTIVE = frozenset(
    {MonitorStatus.ARMED, MonitorStatus.PAUSED, MonitorStatus.READY, MonitorStatus.DELIVERING}
)


@dataclass(frozen=True)
class Monitor:
    """One monitor (table ``monitors``; JSON columns decoded).

    Attributes:
        id: 32 hex characters, the handle ``monitor__create`` returns (and its workflow's id).
        session_id: The owner's session (where the wake-up goes).
        user: The user it acts for.
        workspace: The owner's workspace.
        status: :class:`MonitorStatus`.
        source: What it watches (``{"type": "tool", "name", "args"}``, ``{"type": "event", "eventType",
            "fallback"?}``, ``{"type": "time", "at"}``), as checked at creation.
        condition: ``{"path", "operator", "value"?}``, or None (a time source; an event source: any event).
        continuation: What the agent asked to be told with the wake-up, or None.
        interval_seconds: Seconds between two checks.
        deadline_at: When it times out (pausing does not move it).
        baseline: ``{"value": ...}``: the first good read a ``changed`` condition compares with, or None.
        last_observation: The last check: ``{"at", "state", "value"?, "error"?}``, or None before the first.
        match: The observation that matched (kept for the delivery), or None.
        cursor: Where an event source has read up to (``{"pipelineEvent": id}``).
        checks: How many checks ran.
        fired: ``match`` or ``timeout`` once it fired, else None.
        delivery: How it was delivered (``{"mode": "steer"|"turn", "runId", "at"}``), or None.
        error: Why it is ``blocked`` (or a delivery's refusal), or None.
        paused_at: When it was paused (None unless ``paused``).
        created_at, updated_at, ended_at: Its times (``ended_at`` once it ended).
    """

    id: str
    session_id: str
    user: str
    workspace: str
    status: MonitorStatus
    source: dict[str, Any]
    condition: dict[str, Any] | None
    continuation: str | None
    interval_seconds: float
    deadline_at: datetime
    baseline: dict[str, Any] | None
    last_observation: dict[str, Any] | None
    match: dict[str, Any] | None
    cursor: dict[str, Any]
    checks: int
    fired: str | None
    delivery: dict[str, Any] | None
    error: str | None
    paused_at: datetime | None
    created_at: datetime
    updated_at: datetime
    ended_at: datetime | None
