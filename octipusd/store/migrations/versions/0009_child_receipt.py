"""A child run's receipt.

Hand-written (issue 15 item 6). New column ``runs.receipt``: a child run's receipt as a JSON
object (its worktree, branch, head, diff stat, files, merge outcome, gate results, attempts),
written when the child ends. Root turns and older runs keep NULL.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("receipt", sa.Text(), nullable=True))


def downgrade() -> None:
    # a plain column: SQLite (>= 3.35) drops it in place; a batch copy of ``runs`` would break the
    # foreign keys that point at it
    op.drop_column("runs", "receipt")
