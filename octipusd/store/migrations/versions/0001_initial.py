"""Initial schema: sessions, runs, run_events, vendor_sessions, approvals, work_plans.

Revision ID: 0001
Revises:
Create Date: 2025-01-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.String(32)


def upgrade() -> None:
    """Create every table of the initial schema."""
    op.create_table(
        "sessions",
        sa.Column("id", _ID, nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("adapter", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("permission_mode", sa.Text(), nullable=False),
        sa.Column("attended", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_sessions"),
    )
    op.create_index("ix_sessions_created_at", "sessions", ["created_at"])

    op.create_table(
        "runs",
        sa.Column("id", _ID, nullable=False),
        sa.Column("session_id", _ID, nullable=False),
        sa.Column("turn_index", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("vendor_session_id", sa.Text(), nullable=True),
        sa.Column("resumed", sa.Boolean(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_creation_input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("usage_estimated", sa.Boolean(), nullable=False),
        sa.Column("result_text", sa.Text(), nullable=True),
        sa.Column("owner", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_runs_session_id_sessions"),
        sa.UniqueConstraint("session_id", "turn_index", name="uq_runs_session_id_turn_index"),
    )
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_index("ix_runs_created_at", "runs", ["created_at"])

    op.create_table(
        "run_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("run_id", _ID, nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_run_events"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_run_events_run_id_runs"),
        sa.UniqueConstraint("run_id", "seq", name="uq_run_events_run_id_seq"),
    )

    op.create_table(
        "vendor_sessions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", _ID, nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("vendor_session_id", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("cwd", sa.Text(), nullable=False),
        sa.Column("clear_generation", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_vendor_sessions"),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_vendor_sessions_session_id_sessions"
        ),
        sa.UniqueConstraint("session_id", "key", name="uq_vendor_sessions_session_id_key"),
    )

    op.create_table(
        "approvals",
        sa.Column("id", _ID, nullable=False),
        sa.Column("run_id", _ID, nullable=False),
        sa.Column("session_id", _ID, nullable=False),
        sa.Column("tool_id", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("input", sa.Text(), nullable=False),
        sa.Column("explanation", sa.Text(), nullable=True),
        sa.Column("vendor_request_id", sa.Text(), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("decided_by", sa.Text(), nullable=True),
        sa.Column("decision_reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_approvals"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_approvals_run_id_runs"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_approvals_session_id_sessions"),
    )
    op.create_index("ix_approvals_run_id", "approvals", ["run_id"])
    op.create_index("ix_approvals_session_id", "approvals", ["session_id"])
    op.create_index("ix_approvals_status", "approvals", ["status"])

    op.create_table(
        "work_plans",
        sa.Column("session_id", _ID, nullable=False),
        sa.Column("plan", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id", name="pk_work_plans"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_work_plans_session_id_sessions"),
    )


def downgrade() -> None:
    """Drop every table of the initial schema."""
    op.drop_table("work_plans")
    op.drop_index("ix_approvals_status", table_name="approvals")
    op.drop_index("ix_approvals_session_id", table_name="approvals")
    op.drop_index("ix_approvals_run_id", table_name="approvals")
    op.drop_table("approvals")
    op.drop_table("vendor_sessions")
    op.drop_table("run_events")
    op.drop_index("ix_runs_created_at", table_name="runs")
    op.drop_index("ix_runs_status", table_name="runs")
    op.drop_table("runs")
    op.drop_index("ix_sessions_created_at", table_name="sessions")
    op.drop_table("sessions")
