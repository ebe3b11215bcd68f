"""Schedules: cron schedules of unattended turns or pipeline runs, and the slots they fired.

Hand-written (issue 28 item 8). New tables ``schedules`` and ``schedule_firings`` (the public
record; the durable engine keeps the schedules' timers in its own system database).
``schedule_firings`` is unique per ``(schedule_id, slot_at)``: a slot fires once.

Revision ID: 0015
Revises: 0013
Create Date: 2026-12-08 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.String(32)
_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create ``schedules`` and ``schedule_firings``."""
    op.create_table(
        "schedules",
        sa.Column("id", _ID, nullable=False),
        sa.Column("user", sa.Text(), nullable=False),
        sa.Column("cron", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("session_id", _ID, nullable=True),
        sa.Column("workspace", sa.Text(), nullable=True),
        sa.Column("prompt", sa.Text(), nullable=True),
        sa.Column("pipeline", sa.Text(), nullable=True),
        sa.Column("params", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("active_since", _TS, nullable=False),
        sa.Column("last_slot_at", _TS, nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_schedules"),
    )
    op.create_index("ix_schedules_status", "schedules", ["status"])
    op.create_table(
        "schedule_firings",
        sa.Column("id", _ID, nullable=False),
        sa.Column("schedule_id", _ID, nullable=False),
        sa.Column("slot_at", _TS, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("caught_up", sa.Boolean(), nullable=False),
        sa.Column("session_id", _ID, nullable=True),
        sa.Column("run_id", _ID, nullable=True),
        sa.Column("pipeline_id", _ID, nullable=True),
        sa.Column("delivery", sa.String(16), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["schedule_id"], ["schedules.id"], name="fk_schedule_firings_schedule_id_schedules"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_schedule_firings"),
        sa.UniqueConstraint("schedule_id", "slot_at", name="uq_schedule_firings_schedule_id_slot_at"),
    )


def downgrade() -> None:
    """Drop the schedule tables."""
    op.drop_table("schedule_firings")
    op.drop_index("ix_schedules_status", table_name="schedules")
    op.drop_table("schedules")
