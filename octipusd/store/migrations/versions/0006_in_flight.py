"""The action journal: how long a dispatched request may still land, and where it went.

Hand-written (issue 11). New columns of ``tool_actions``: ``in_flight_until`` (when no
dispatched request of the call can land any more), ``dispatch`` (JSON: where the request went,
e.g. a streamable HTTP MCP session id) and ``dispatch_ended_at`` (when Octipus positively ended
that transport). Existing records get ``in_flight_until = started_at``: they were written by a
daemon that did not record the bound, and keep the settlement rule they were written under.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Add the columns and fill ``in_flight_until`` of existing records."""
    op.add_column("tool_actions", sa.Column("in_flight_until", _TS, nullable=True))
    op.add_column("tool_actions", sa.Column("dispatch", sa.Text(), nullable=True))
    op.add_column("tool_actions", sa.Column("dispatch_ended_at", _TS, nullable=True))
    op.execute("UPDATE tool_actions SET in_flight_until = started_at")


def downgrade() -> None:
    """Drop the columns."""
    with op.batch_alter_table("tool_actions") as batch:
        batch.drop_column("dispatch_ended_at")
        batch.drop_column("dispatch")
        batch.drop_column("in_flight_until")
