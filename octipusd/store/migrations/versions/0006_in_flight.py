"""The action journal: how long a dispatched request may still land, and where it went.

Hand-written (issue 11). New columns of ``tool_actions``: ``in_flight_until`` (when no
dispatched request of the call can land any more), ``dispatch`` (JSON: where the request went,
e.g. a streamable HTTP MCP session id) and ``dispatch_ended_at`` (when Octipus positively ended
that transport); an index on ``(user, tool, idempotency_key)`` for the checks before a retry.
Existing records were written by a daemon that did not record the bound:
finished or settled ones get ``in_flight_until = started_at`` (nothing depends on it any more);
unsettled ones (``started`` or ``uncertain`` not verified, compensated or contained, reviewed or
not: a same-key retry is judged by the bound whatever a review said) get ``started_at`` plus
the longest call deadline a connector can have (``callTimeoutSeconds`` at most 7200 s, plus the
bridge's 5 s), since their request may still be in flight.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TS = sa.DateTime(timezone=True)
#: The longest in-flight bound a pre-0006 call can have had (seconds): callTimeoutSeconds' maximum
#: plus the bridge's margin.
_LONGEST_CALL_SECONDS = 7200.0 + 5.0
_RESOLVED = ("verified", "compensated", "contained")
_KEY_INDEX = "ix_tool_actions_user_tool_key"


def upgrade() -> None:
    """Add the columns and fill ``in_flight_until`` of existing records."""
    op.add_column("tool_actions", sa.Column("in_flight_until", _TS, nullable=True))
    op.add_column("tool_actions", sa.Column("dispatch", sa.Text(), nullable=True))
    op.add_column("tool_actions", sa.Column("dispatch_ended_at", _TS, nullable=True))
    op.create_index(_KEY_INDEX, "tool_actions", ["user", "tool", "idempotency_key"])
    op.execute("UPDATE tool_actions SET in_flight_until = started_at")
    actions = sa.table(
        "tool_actions",
        sa.column("id", sa.String(32)),
        sa.column("outcome", sa.String(16)),
        sa.column("review_id", sa.String(32)),
        sa.column("recovery_state", sa.String(24)),
        sa.column("started_at", _TS),
        sa.column("in_flight_until", _TS),
    )
    bind = op.get_bind()
    unresolved = bind.execute(
        sa.select(actions.c.id, actions.c.started_at).where(
            actions.c.outcome.in_(("started", "uncertain")),
            sa.or_(actions.c.recovery_state.is_(None), actions.c.recovery_state.not_in(_RESOLVED)),
        )
    ).all()
    for action_id, started_at in unresolved:
        bind.execute(
            sa.update(actions)
            .where(actions.c.id == action_id)
            .values(in_flight_until=started_at + timedelta(seconds=_LONGEST_CALL_SECONDS))
        )


def downgrade() -> None:
    """Drop the columns."""
    op.drop_index(_KEY_INDEX, table_name="tool_actions")
    with op.batch_alter_table("tool_actions") as batch:
        batch.drop_column("dispatch_ended_at")
        batch.drop_column("dispatch")
        batch.drop_column("in_flight_until")
