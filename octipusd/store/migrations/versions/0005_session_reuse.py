"""Session reuse: clear generations, the session transcript, checkpoints, child runs.

Hand-written (seed 003 "Session reuse" to "Resuming child sessions per role and task"). New
tables ``session_messages`` and ``session_checkpoints``; new columns
``sessions.clear_generation`` (0 for existing sessions) and ``sessions.cleared_at``;
``vendor_sessions.cursor`` (0: the vendor has seen no recorded message), ``last_used_at``
(existing records take their ``updated_at``) and ``checkpoint_id``; ``runs.parent_run_id``,
``runs.role`` and ``runs.resume_key`` (child agent runs). Existing vendor records keep
``clear_generation`` 0, which every existing session also has, so they stay reusable.

``runs`` is referenced by other tables, so on SQLite its foreign key column is added with
``ALTER TABLE ... ADD COLUMN ... REFERENCES`` (as 0003 does) rather than by rebuilding it;
making ``vendor_sessions.last_used_at`` NOT NULL and adding its checkpoint foreign key
rebuilds ``vendor_sessions`` once (Alembic batch mode, as 0004 does for ``approvals``; nothing
references ``vendor_sessions``).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.String(32)
_TS = sa.DateTime(timezone=True)
_PARENT_FK = "fk_runs_parent_run_id_runs"
_CHECKPOINT_FK = "fk_vendor_sessions_checkpoint_id_session_checkpoints"


def _big_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the transcript and checkpoint tables and add the new columns."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.add_column("sessions", sa.Column("clear_generation", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("sessions", sa.Column("cleared_at", _TS, nullable=True))

    if sqlite:
        op.execute(
            f"ALTER TABLE runs ADD COLUMN parent_run_id VARCHAR(32) CONSTRAINT {_PARENT_FK} REFERENCES runs (id)"
        )
    else:
        op.add_column("runs", sa.Column("parent_run_id", _ID, nullable=True))
        op.create_foreign_key(_PARENT_FK, "runs", "runs", ["parent_run_id"], ["id"])
    op.create_index("ix_runs_parent_run_id", "runs", ["parent_run_id"])
    op.add_column("runs", sa.Column("role", sa.Text(), nullable=True))
    op.add_column("runs", sa.Column("resume_key", sa.Text(), nullable=True))

    op.create_table(
        "session_messages",
        sa.Column("id", _big_id(), nullable=False),
        sa.Column("session_id", _ID, nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("run_id", _ID, nullable=True),
        sa.Column("adapter", sa.Text(), nullable=True),
        sa.Column("clear_generation", sa.Integer(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_session_messages_session_id_sessions"
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_session_messages_run_id_runs"),
        sa.PrimaryKeyConstraint("id", name="pk_session_messages"),
        sa.UniqueConstraint("session_id", "seq", name="uq_session_messages_session_id_seq"),
    )
    op.create_index("ix_session_messages_run_id", "session_messages", ["run_id"])
    op.create_table(
        "session_checkpoints",
        sa.Column("id", _big_id(), nullable=False),
        sa.Column("session_id", _ID, nullable=False),
        sa.Column("clear_generation", sa.Integer(), nullable=False),
        sa.Column("first_seq", sa.Integer(), nullable=False),
        sa.Column("through_seq", sa.Integer(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("covered_chars", sa.BigInteger(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_session_checkpoints_session_id_sessions"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_session_checkpoints"),
        sa.UniqueConstraint(
            "session_id",
            "clear_generation",
            "through_seq",
            name="uq_session_checkpoints_session_id_clear_generation_through_seq",
        ),
    )

    op.add_column("vendor_sessions", sa.Column("cursor", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("vendor_sessions", sa.Column("last_used_at", _TS, nullable=True))
    op.execute("UPDATE vendor_sessions SET last_used_at = updated_at")
    with op.batch_alter_table("vendor_sessions") as batch:
        batch.alter_column("last_used_at", existing_type=_TS, nullable=False)
        batch.add_column(sa.Column("checkpoint_id", _big_id(), nullable=True))
        batch.create_foreign_key(_CHECKPOINT_FK, "session_checkpoints", ["checkpoint_id"], ["id"])
    op.create_index("ix_vendor_sessions_checkpoint_id", "vendor_sessions", ["checkpoint_id"])


def downgrade() -> None:
    """Drop the new tables and columns (transcripts, checkpoints, clear generations are lost)."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.drop_index("ix_vendor_sessions_checkpoint_id", table_name="vendor_sessions")
    with op.batch_alter_table("vendor_sessions") as batch:
        batch.drop_constraint(_CHECKPOINT_FK, type_="foreignkey")
        batch.drop_column("checkpoint_id")
        batch.drop_column("last_used_at")
        batch.drop_column("cursor")
    op.drop_table("session_checkpoints")
    op.drop_index("ix_session_messages_run_id", table_name="session_messages")
    op.drop_table("session_messages")
    op.drop_index("ix_runs_parent_run_id", table_name="runs")
    if sqlite:
        for column in ("resume_key", "role", "parent_run_id"):
            op.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        for column in ("cleared_at", "clear_generation"):
            op.execute(f"ALTER TABLE sessions DROP COLUMN {column}")
    else:
        op.drop_column("runs", "resume_key")
        op.drop_column("runs", "role")
        op.drop_constraint(_PARENT_FK, "runs", type_="foreignkey")
        op.drop_column("runs", "parent_run_id")
        op.drop_column("sessions", "cleared_at")
        op.drop_column("sessions", "clear_generation")
