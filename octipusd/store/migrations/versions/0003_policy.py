"""Policy: stored rules and scoped grants, spaces, flow labels, questionnaires, plan-mode turns.

Hand-written. New tables ``permission_rules``, ``permission_grants``, ``spaces`` and
``space_members``; new columns ``sessions.flow_label`` and ``sessions.space_id``,
``runs.plan_mode`` and ``runs.author``, ``approvals.kind``, ``approvals.questions``,
``approvals.answers`` and ``approvals.grant_id``. As in 0002, existing tables are altered in
place on both backends (SQLite accepts ``ADD COLUMN ... REFERENCES`` when the default is NULL).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.String(32)
_TS = sa.DateTime(timezone=True)
_SPACE_FK = "fk_sessions_space_id_spaces"


def upgrade() -> None:
    """Create the policy and space tables and add the new columns."""
    op.create_table(
        "spaces",
        sa.Column("id", _ID, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("archived_at", _TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_spaces"),
        sa.UniqueConstraint("name", name="uq_spaces_name"),
    )
    op.create_table(
        "space_members",
        sa.Column("space_id", _ID, nullable=False),
        sa.Column("user", sa.Text(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("added_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(["space_id"], ["spaces.id"], name="fk_space_members_space_id_spaces"),
        sa.PrimaryKeyConstraint("space_id", "user", name="pk_space_members"),
    )
    op.create_table(
        "permission_rules",
        sa.Column("id", _ID, nullable=False),
        sa.Column("level", sa.String(16), nullable=False),
        sa.Column("rule", sa.Text(), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_permission_rules"),
        sa.UniqueConstraint("level", "rule", name="uq_permission_rules_level_rule"),
    )
    op.create_table(
        "permission_grants",
        sa.Column("id", _ID, nullable=False),
        sa.Column("tool_id", sa.Text(), nullable=False),
        sa.Column("matcher", sa.Text(), nullable=True),
        sa.Column("level", sa.String(16), nullable=False),
        sa.Column("session_id", _ID, nullable=True),
        sa.Column("workspace", sa.Text(), nullable=True),
        sa.Column("expires_at", _TS, nullable=True),
        sa.Column("max_uses", sa.Integer(), nullable=True),
        sa.Column("uses", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("revoked_at", _TS, nullable=True),
        sa.Column("revoked_by", sa.Text(), nullable=True),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("approval_id", _ID, nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_permission_grants_session_id_sessions"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_permission_grants"),
    )
    op.create_index("ix_permission_grants_session_id", "permission_grants", ["session_id"])
    op.add_column("sessions", sa.Column("flow_label", sa.Text(), nullable=False, server_default=""))
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            f"ALTER TABLE sessions ADD COLUMN space_id VARCHAR(32) CONSTRAINT {_SPACE_FK} REFERENCES spaces (id)"
        )
    else:
        op.add_column("sessions", sa.Column("space_id", _ID, nullable=True))
        op.create_foreign_key(_SPACE_FK, "sessions", "spaces", ["space_id"], ["id"])
    op.create_index("ix_sessions_space_id", "sessions", ["space_id"])
    op.add_column("runs", sa.Column("plan_mode", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("runs", sa.Column("author", sa.Text(), nullable=True))
    op.add_column("approvals", sa.Column("kind", sa.String(16), nullable=False, server_default="tool"))
    op.add_column("approvals", sa.Column("questions", sa.Text(), nullable=True))
    op.add_column("approvals", sa.Column("answers", sa.Text(), nullable=True))
    op.add_column("approvals", sa.Column("grant_id", _ID, nullable=True))


def downgrade() -> None:
    """Drop the new columns and tables (stored rules, grants and spaces are lost)."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    for table, column in (
        ("approvals", "grant_id"),
        ("approvals", "answers"),
        ("approvals", "questions"),
        ("approvals", "kind"),
        ("runs", "author"),
        ("runs", "plan_mode"),
    ):
        if sqlite:
            op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        else:
            op.drop_column(table, column)
    op.drop_index("ix_sessions_space_id", table_name="sessions")
    if sqlite:
        op.execute("ALTER TABLE sessions DROP COLUMN space_id")
        op.execute("ALTER TABLE sessions DROP COLUMN flow_label")
    else:
        op.drop_constraint(_SPACE_FK, "sessions", type_="foreignkey")
        op.drop_column("sessions", "space_id")
        op.drop_column("sessions", "flow_label")
    op.drop_index("ix_permission_grants_session_id", table_name="permission_grants")
    op.drop_table("permission_grants")
    op.drop_table("permission_rules")
    op.drop_table("space_members")
    op.drop_table("spaces")
