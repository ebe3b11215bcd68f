"""A run's host services.

Hand-written (issue 17 item 5). New column ``runs.host_services``: the run's own shell commands
share the host network and the Docker socket under the shell sandbox (seed 003 "Host services for
gate commands"). Existing runs keep false.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("host_services", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    # a plain column: SQLite (>= 3.35) drops it in place (see 0009)
    op.drop_column("runs", "host_services")
