"""Schedules as the store returns them (issue 28 item 8): frozen values.

A schedule fires a cron expression's slots, each an unattended turn in a session (``prompt``) or a
pipeline run (``pipeline``), in a named session or in a new session of a workspace per firing. It is
``active`` or ``paused``; removing it deletes it. Each slot it fires is one :class:`ScheduleFiring`,
claimed once (the slot's time is part of its key), started once (:class:`FiringStatus`): ``started`` with what it
started, ``failed`` with why it could not start, or ``skipped`` (the schedule was paused when the slot
came).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

__all__ = ["FiringStatus", "Schedule", "ScheduleFiring", "ScheduleKind", "ScheduleStatus"]


class ScheduleStatus(StrEnum):
    """Whether a schedule fires."""

    ACTIVE = "active"
    PAUSED = "paused"


class ScheduleKind(StrEnum):
    """What a firing starts: a turn with the schedule's prompt, or a run of a pipeline template."""

    PROMPT = "prompt"
    PIPELINE = "pipeline"


class FiringStatus(StrEnum):
    """How one slot's firing went: ``claimed`` (its workflow holds it), ``starting`` (being started:
    a restart finding it so marks it ``failed``, never starts it twice), then ``started``,
    ``failed`` or ``skipped``."""

    CLAIMED = "claimed"
    STARTING = "starting"
    STARTED = "started"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Schedule:
    """One schedule.

    Attributes:
        id: 32 hex characters.
        user: The user it acts for (its pipelines' owner).
        cron: The cron expression (5 fields, or 6 with seconds first), evaluated in UTC.
        kind: What each firing starts.
        session_id: The session each firing continues, or None (``workspace`` given).
        workspace: The workspace a new session is made in at each firing, or None.
        prompt: The turn's text (``kind`` prompt).
        pipeline: The pipeline template's name or id (``kind`` pipeline).
        params: The template's parameters.
        status: Active or paused.
        active_since: When it last became active (creation or resume): slots before it are never
            caught up.
        last_slot_at: The latest slot claimed, or None.
        created_at: When it was created.
        updated_at: When it last changed.
    """

    id: str
    user: str
    cron: str
    kind: ScheduleKind
    session_id: str | None
    workspace: str | None
    prompt: str | None
    pipeline: str | None
    params: dict[str, Any] = field(default_factory=dict)
    status: ScheduleStatus = ScheduleStatus.ACTIVE
    active_since: datetime | None = None
    last_slot_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class ScheduleFiring:
    """One slot of a schedule, fired once.

    Attributes:
        id: 32 hex characters.
        schedule_id: Its schedule.
        slot_at: The slot's time (UTC): with ``schedule_id``, unique.
        status: How it went.
        caught_up: True when it fired at start-up for a slot missed while the daemon was down.
        session_id: The session it worked in, once known.
        run_id: The turn it started (``prompt``), or None.
        pipeline_id: The pipeline it started (``pipeline``), or None.
        delivery: How a prompt reached the session: ``turn`` (a new turn) or ``steered`` (into its
            live run), or None.
        error: Why it failed or was skipped.
        created_at: When it was claimed.
        updated_at: When it last changed.
    """

    id: str
    schedule_id: str
    slot_at: datetime
    status: FiringStatus
    caught_up: bool = False
    session_id: str | None = None
    run_id: str | None = None
    pipeline_id: str | None = None
    delivery: str | None = None
    error: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
