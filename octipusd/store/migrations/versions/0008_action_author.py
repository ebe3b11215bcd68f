"""The action journal records who made each call.

Hand-written (issue 14 item 13). New column ``tool_actions.author``: the person who started the
turn whose bridge made the call (a space member), or who started the call by hand. ``user``
stays the account the call runs for (the recovery scope). Existing records keep NULL (their
author is their ``user``).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("tool_actions", sa.Column("author", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tool_actions") as batch:
        batch.drop_column("author")
