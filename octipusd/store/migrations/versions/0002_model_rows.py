"""Model rows: the ``models`` table; ``sessions.model_row_id`` and ``sessions.options``.

Hand-written. ``sessions`` is altered in place on both backends (no batch copy of the
table: on SQLite, with ``foreign_keys=ON``, dropping the old ``sessions`` table inside the
migration's transaction would trip the foreign keys of ``runs``, ``approvals`` and the
others). SQLite's ``ALTER TABLE ... ADD COLUMN`` accepts a ``REFERENCES`` clause when the
column's default is NULL, which is how the foreign key is added there; PostgreSQL adds it
as a named constraint. The foreign key has no ``ON DELETE`` action: the store detaches the
sessions of a deleted model row itself (see ``Store.delete_model_row``).

Revision ID: 0002
Revises: 0001
Create Date: 2025-02-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.String(32)
_FK_NAME = "fk_sessions_model_row_id_models"


def upgrade() -> None:
    """Create ``models``; add ``sessions.model_row_id`` (indexed, foreign key) and ``sessions.options``."""
    op.create_table(
        "models",
        sa.Column("id", _ID, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("adapter", sa.Text(), nullable=False),
        sa.Column("binary", sa.Text(), nullable=True),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("permission_mode", sa.Text(), nullable=False),
        sa.Column("additive_flags", sa.Text(), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_models"),
        sa.UniqueConstraint("name", name="uq_models_name"),
    )
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            f"ALTER TABLE sessions ADD COLUMN model_row_id VARCHAR(32) "
            f"CONSTRAINT {_FK_NAME} REFERENCES models (id)"
        )
    else:
        op.add_column("sessions", sa.Column("model_row_id", _ID, nullable=True))
        op.create_foreign_key(_FK_NAME, "sessions", "models", ["model_row_id"], ["id"])
    op.create_index("ix_sessions_model_row_id", "sessions", ["model_row_id"])
    op.add_column("sessions", sa.Column("options", sa.Text(), nullable=False, server_default="{}"))


def downgrade() -> None:
    """Drop the session columns and the ``models`` table (the model rows are lost).

    On SQLite this needs ``ALTER TABLE ... DROP COLUMN`` (SQLite 3.35 or newer); as in
    :func:`upgrade`, ``sessions`` is not copied.
    """
    op.drop_index("ix_sessions_model_row_id", table_name="sessions")
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE sessions DROP COLUMN options")
        op.execute("ALTER TABLE sessions DROP COLUMN model_row_id")
    else:
        op.drop_constraint(_FK_NAME, "sessions", type_="foreignkey")
        op.drop_column("sessions", "options")
        op.drop_column("sessions", "model_row_id")
    op.drop_table("models")
