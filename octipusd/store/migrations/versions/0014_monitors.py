"""Monitors (issue 28 item 7, FACTS.md §7): table ``monitors``.

Hand-written. One row per monitor: its owner (session, user, workspace), source and condition,
interval and deadline, its last observation and baseline, and how it was delivered. The durable
engine keeps where each monitor's workflow is, in its own system database.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-14 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.String(32)
_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create the ``monitors`` table."""
    op.create_table(
        "monitors",
        sa.Column("id", _ID, nullable=False),
        sa.Column("session_id", _ID, nullable=False),
        sa.Column("user", sa.Text(), nullable=False),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("condition", sa.Text(), nullable=True),
        sa.Column("continuation", sa.Text(), nullable=True),
        sa.Column("interval_seconds", sa.Float(), nullable=False),
        sa.Column("deadline_at", _TS, nullable=False),
        sa.Column("baseline", sa.Text(), nullable=True),
        sa.Column("last_observation", sa.Text(), nullable=True),
        sa.Column("match", sa.Text(), nullable=True),
        sa.Column("cursor", sa.Text(), nullable=False),
        sa.Column("checks", sa.Integer(), nullable=False),
        sa.Column("fired", sa.String(16), nullable=True),
        sa.Column("delivery", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("paused_at", _TS, nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        sa.Column("ended_at", _TS, nullable=True),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_monitors_session_id_sessions"),
        sa.PrimaryKeyConstraint("id", name="pk_monitors"),
    )
    op.create_index("ix_monitors_session_id", "monitors", ["session_id"])
    op.create_index("ix_monitors_status", "monitors", ["status"])


def downgrade() -> None:
    """Drop the ``monitors`` table (its records are lost)."""
    op.drop_index("ix_monitors_status", table_name="monitors")
    op.drop_index("ix_monitors_session_id", table_name="monitors")
    op.drop_table("monitors")
