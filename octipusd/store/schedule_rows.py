"""SQLModel tables of schedules (issue 28 item 8), beside :mod:`octipusd.store.models` (their conventions:
ids ``VARCHAR(32)``, UTC datetimes, JSON as text). Migration ``0015_schedules`` creates them; the
migration tests compare them with the migrated database like every other table.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from octipusd.store.codec import utcnow
from octipusd.store.models import UTCDateTime

__all__ = ["ScheduleFiringRow", "ScheduleRow"]

_ID = sa.String(32)


class ScheduleRow(SQLModel, table=True):
    """Table ``schedules``: a cron schedule of unattended turns or pipeline runs (issue 28 item 8).

    Exactly one of ``session_id`` / ``workspace`` is set, and ``prompt`` for ``kind`` prompt or
    ``pipeline`` (a template's name or id) with ``params`` (JSON object) for ``kind`` pipeline. The
    durable engine holds the schedule's timer under the name ``octipus-schedule-<id>``.
    """

    __tablename__ = "schedules"

    id: str = Field(primary_key=True, sa_type=_ID)
    user: str = Field(sa_type=sa.Text)
    cron: str = Field(sa_type=sa.Text)
    kind: str = Field(sa_type=sa.String(16))
    session_id: str | None = Field(default=None, sa_type=_ID)
    workspace: str | None = Field(default=None, sa_type=sa.Text)
    prompt: str | None = Field(default=None, sa_type=sa.Text)
    pipeline: str | None = Field(default=None, sa_type=sa.Text)
    params: str = Field(default="{}", sa_type=sa.Text)
    status: str = Field(index=True, sa_type=sa.String(16))
    active_since: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    last_slot_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class ScheduleFiringRow(SQLModel, table=True):
    """Table ``schedule_firings``: one slot a schedule fired, unique per ``(schedule_id, slot_at)``
    (the claim that makes a slot fire once, whoever fires it). Deleted with its schedule."""

    __tablename__ = "schedule_firings"
    __table_args__ = (sa.UniqueConstraint("schedule_id", "slot_at"),)

    id: str = Field(primary_key=True, sa_type=_ID)
    schedule_id: str = Field(foreign_key="schedules.id", sa_type=_ID)  # indexed by the unique key
    slot_at: datetime = Field(sa_type=UTCDateTime)
    status: str = Field(sa_type=sa.String(16))
    caught_up: bool = Field(default=False)
    session_id: str | None = Field(default=None, sa_type=_ID)
    run_id: str | None = Field(default=None, sa_type=_ID)
    pipeline_id: str | None = Field(default=None, sa_type=_ID)
    delivery: str | None = Field(default=None, sa_type=sa.String(16))
    error: str | None = Field(default=None, sa_type=sa.Text)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
