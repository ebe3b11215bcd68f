"""The vault's entries.

Hand-written (issue 17 item 1). New table ``vault_entries``: one named credential per row, its
value only as a Fernet token (``ciphertext``; the key stays outside the database), the users and
tools allowed to use it (JSON lists), when it was created and updated, and its latest use (time
and tool).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create ``vault_entries``."""
    op.create_table(
        "vault_entries",
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("ciphertext", sa.Text(), nullable=False),
        sa.Column("users", sa.Text(), nullable=False),
        sa.Column("tools", sa.Text(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        sa.Column("last_used_at", _TS, nullable=True),
        sa.Column("last_used_tool", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_vault_entries"),
    )


def downgrade() -> None:
    """Drop ``vault_entries`` (the stored credentials are lost)."""
    op.drop_table("vault_entries")
