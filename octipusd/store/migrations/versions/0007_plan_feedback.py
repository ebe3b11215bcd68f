"""Work-plan revisions and the feedback history of a plan.

Hand-written (issue 14 item 2; seed 003 "Plans, feedback and delegation", FACTS.md §8). New column
``work_plans.revision`` (existing plans take revision 1: one save is all that is known of them) and
new table ``plan_feedback``: one row per item of a person's feedback on a session's plan or one of
its steps, with the revision it was given at, its status (``pending``, ``applied``,
``needs_clarification``), the agent's latest note and the person's replies (JSON list).
``plan_feedback.session_id`` is served by the unique key ``(session_id, seq)`` that leads with it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.String(32)
_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Add ``work_plans.revision`` and create ``plan_feedback``."""
    op.add_column("work_plans", sa.Column("revision", sa.Integer(), nullable=False, server_default="1"))
    op.create_table(
        "plan_feedback",
        sa.Column("id", _ID, nullable=False),
        sa.Column("session_id", _ID, nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("step_id", sa.Text(), nullable=True),
        sa.Column("author", sa.Text(), nullable=False),
        sa.Column("plan_revision", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("response", sa.Text(), nullable=True),
        sa.Column("responded_at", _TS, nullable=True),
        sa.Column("responded_revision", sa.Integer(), nullable=True),
        sa.Column("replies", sa.Text(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_plan_feedback_session_id_sessions"),
        sa.PrimaryKeyConstraint("id", name="pk_plan_feedback"),
        sa.UniqueConstraint("session_id", "seq", name="uq_plan_feedback_session_id_seq"),
    )


def downgrade() -> None:
    """Drop ``plan_feedback`` and ``work_plans.revision`` (the feedback history is lost)."""
    op.drop_table("plan_feedback")
    with op.batch_alter_table("work_plans") as batch:
        batch.drop_column("revision")
