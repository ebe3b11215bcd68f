"""The action journal: tool actions, their receipts, calls started by hand; approvals without a run.

Hand-written. New tables ``tool_actions`` (seed 000), ``action_receipts`` (seed 004) and
``tool_invocations`` (seed 001); ``approvals.run_id`` becomes nullable (a recovery review of a
call started by hand, or a pipeline replay review, belongs to no run) and ``approvals`` gains
``action_ids`` (the records a recovery review covers). On SQLite the nullability change
rebuilds ``approvals`` (Alembic batch mode).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.String(32)
_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create the journal tables and relax ``approvals.run_id``."""
    op.create_table(
        "tool_actions",
        sa.Column("id", _ID, nullable=False),
        sa.Column("user", sa.Text(), nullable=False),
        sa.Column("session_id", _ID, nullable=True),
        sa.Column("run_id", _ID, nullable=True),
        sa.Column("agent", sa.Text(), nullable=True),
        sa.Column("pipeline_id", sa.Text(), nullable=True),
        sa.Column("node_id", sa.Text(), nullable=True),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("invocation_id", _ID, nullable=True),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("args_hash", sa.String(64), nullable=False),
        sa.Column("risk_class", sa.String(16), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=True),
        sa.Column("recovery_owner", sa.Text(), nullable=True),
        sa.Column("deadline_seconds", sa.Float(), nullable=False),
        sa.Column("owner", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("recovery_state", sa.String(24), nullable=True),
        sa.Column("deadline_at", _TS, nullable=True),
        sa.Column("review_id", _ID, nullable=True),
        sa.Column("reviewed_by", sa.Text(), nullable=True),
        sa.Column("reviewed_at", _TS, nullable=True),
        sa.Column("started_at", _TS, nullable=False),
        sa.Column("finished_at", _TS, nullable=True),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_tool_actions_session_id_sessions"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_tool_actions_run_id_runs"),
        sa.PrimaryKeyConstraint("id", name="pk_tool_actions"),
    )
    op.create_index("ix_tool_actions_user", "tool_actions", ["user"])
    op.create_index("ix_tool_actions_session_id", "tool_actions", ["session_id"])
    op.create_index("ix_tool_actions_run_id", "tool_actions", ["run_id"])
    op.create_index("ix_tool_actions_pipeline_id", "tool_actions", ["pipeline_id"])
    op.create_index("ix_tool_actions_outcome", "tool_actions", ["outcome"])
    op.create_table(
        "action_receipts",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("action_id", _ID, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("state", sa.String(24), nullable=True),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["action_id"], ["tool_actions.id"], name="fk_action_receipts_action_id_tool_actions"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_action_receipts"),
    )
    op.create_index("ix_action_receipts_action_id", "action_receipts", ["action_id"])
    op.create_table(
        "tool_invocations",
        sa.Column("id", _ID, nullable=False),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("user", sa.Text(), nullable=False),
        sa.Column("session_id", _ID, nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("arguments", sa.Text(), nullable=True),
        sa.Column("args_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("approval_id", _ID, nullable=True),
        sa.Column("claim_token", _ID, nullable=True),
        sa.Column("claimed_at", _TS, nullable=True),
        sa.Column("claimed_by", sa.Text(), nullable=True),
        sa.Column("action_id", _ID, nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("is_error", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        sa.Column("finished_at", _TS, nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_tool_invocations_session_id_sessions"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_tool_invocations"),
        sa.UniqueConstraint("user", "request_id", name="uq_tool_invocations_user_request_id"),
    )
    op.create_index("ix_tool_invocations_session_id", "tool_invocations", ["session_id"])
    op.create_index("ix_tool_invocations_status", "tool_invocations", ["status"])
    op.add_column("approvals", sa.Column("action_ids", sa.Text(), nullable=True))
    with op.batch_alter_table("approvals") as batch:
        batch.alter_column("run_id", existing_type=_ID, nullable=True)


def downgrade() -> None:
    """Drop the journal tables (their records are lost); approvals without a run are deleted."""
    op.execute("DELETE FROM approvals WHERE run_id IS NULL")
    with op.batch_alter_table("approvals") as batch:
        batch.alter_column("run_id", existing_type=_ID, nullable=False)
        batch.drop_column("action_ids")
    op.drop_index("ix_tool_invocations_status", table_name="tool_invocations")
    op.drop_index("ix_tool_invocations_session_id", table_name="tool_invocations")
    op.drop_table("tool_invocations")
    op.drop_index("ix_action_receipts_action_id", table_name="action_receipts")
    op.drop_table("action_receipts")
    for name in ("outcome", "pipeline_id", "run_id", "session_id", "user"):
        op.drop_index(f"ix_tool_actions_{name}", table_name="tool_actions")
    op.drop_table("tool_actions")
