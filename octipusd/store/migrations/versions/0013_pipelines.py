"""Pipelines: templates, runs of them, their items, nodes, attempts and history.

Hand-written (issue 27). New tables ``pipeline_templates``, ``pipelines``, ``pipeline_items``,
``pipeline_nodes``, ``pipeline_attempts`` and ``pipeline_events`` (the public record of a pipeline;
the durable engine keeps where its workflow is, in its own system database). ``runs`` gains
``pipeline_id``, ``pipeline_attempt_id``, ``stage`` and ``item_id`` for a stage worker's run
(NULL for every existing run).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.String(32)
_TS = sa.DateTime(timezone=True)
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], [f"{target}.id"], name=f"fk_{table}_{column}_{target}")


def upgrade() -> None:
    """Create the pipeline tables and the stage-worker columns of ``runs``."""
    op.create_table(
        "pipeline_templates",
        sa.Column("id", _ID, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("owner", sa.Text(), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_pipeline_templates"),
        sa.UniqueConstraint("owner", "name", name="uq_pipeline_templates_owner_name"),
    )
    op.create_table(
        "pipelines",
        sa.Column("id", _ID, nullable=False),
        sa.Column("session_id", _ID, nullable=False),
        sa.Column("user", sa.Text(), nullable=False),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("template_id", sa.Text(), nullable=True),
        sa.Column("template", sa.Text(), nullable=False),
        sa.Column("params", sa.Text(), nullable=False),
        sa.Column("graph", sa.Text(), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("plan", sa.Text(), nullable=True),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.Column("pending_changes", sa.Text(), nullable=False),
        sa.Column("tokens_used", sa.BigInteger(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("workflow_id", sa.Text(), nullable=True),
        sa.Column("current_node", sa.String(16), nullable=True),
        sa.Column("current_item_id", _ID, nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        sa.Column("ended_at", _TS, nullable=True),
        _fk("pipelines", "session_id", "sessions"),
        sa.PrimaryKeyConstraint("id", name="pk_pipelines"),
    )
    op.create_index("ix_pipelines_session_id", "pipelines", ["session_id"])
    op.create_index("ix_pipelines_status", "pipelines", ["status"])
    op.create_table(
        "pipeline_items",
        sa.Column("id", _ID, nullable=False),
        sa.Column("pipeline_id", _ID, nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("acceptance", sa.Text(), nullable=True),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("created_by_node_key", sa.String(16), nullable=True),
        sa.Column("created_by_user", sa.Text(), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("evidence", sa.Text(), nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        _fk("pipeline_items", "pipeline_id", "pipelines"),
        sa.PrimaryKeyConstraint("id", name="pk_pipeline_items"),
    )
    op.create_index("ix_pipeline_items_pipeline_id", "pipeline_items", ["pipeline_id"])
    op.create_table(
        "pipeline_nodes",
        sa.Column("pipeline_id", _ID, nullable=False),
        sa.Column("key", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("traversals", sa.Integer(), nullable=False),
        sa.Column("retries", sa.Integer(), nullable=False),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("updated_at", _TS, nullable=False),
        _fk("pipeline_nodes", "pipeline_id", "pipelines"),
        sa.PrimaryKeyConstraint("pipeline_id", "key", name="pk_pipeline_nodes"),
    )
    op.create_table(
        "pipeline_attempts",
        sa.Column("id", _ID, nullable=False),
        sa.Column("pipeline_id", _ID, nullable=False),
        sa.Column("node_key", sa.String(16), nullable=False),
        sa.Column("stage", sa.Text(), nullable=False),
        sa.Column("item_id", _ID, nullable=True),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("start_reason", sa.Text(), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("run_ids", sa.Text(), nullable=False),
        sa.Column("incomplete_text", sa.Text(), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("retry_reason", sa.Text(), nullable=True),
        sa.Column("counters", sa.Text(), nullable=True),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
        sa.Column("step_id", sa.Integer(), nullable=True),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("started_at", _TS, nullable=False),
        sa.Column("ended_at", _TS, nullable=True),
        _fk("pipeline_attempts", "pipeline_id", "pipelines"),
        sa.PrimaryKeyConstraint("id", name="pk_pipeline_attempts"),
    )
    op.create_index("ix_pipeline_attempts_pipeline_id", "pipeline_attempts", ["pipeline_id"])
    op.create_table(
        "pipeline_events",
        sa.Column("id", _BIG_ID, nullable=False),
        sa.Column("pipeline_id", _ID, nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("item_id", _ID, nullable=True),
        sa.Column("attempt_id", _ID, nullable=True),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        _fk("pipeline_events", "pipeline_id", "pipelines"),
        sa.PrimaryKeyConstraint("id", name="pk_pipeline_events"),
        sa.UniqueConstraint("pipeline_id", "seq", name="uq_pipeline_events_pipeline_id_seq"),
    )
    op.add_column("runs", sa.Column("pipeline_id", _ID, nullable=True))
    op.add_column("runs", sa.Column("pipeline_attempt_id", _ID, nullable=True))
    op.add_column("runs", sa.Column("stage", sa.Text(), nullable=True))
    op.add_column("runs", sa.Column("item_id", _ID, nullable=True))
    op.create_index("ix_runs_pipeline_id", "runs", ["pipeline_id"])


def downgrade() -> None:
    """Drop the pipeline tables (their records are lost) and the stage-worker columns of ``runs``."""
    op.drop_index("ix_runs_pipeline_id", table_name="runs")
    for column in ("item_id", "stage", "pipeline_attempt_id", "pipeline_id"):
        op.drop_column("runs", column)  # plain columns: SQLite (>= 3.35) drops them in place
    op.drop_table("pipeline_events")
    op.drop_index("ix_pipeline_attempts_pipeline_id", table_name="pipeline_attempts")
    op.drop_table("pipeline_attempts")
    op.drop_table("pipeline_nodes")
    op.drop_index("ix_pipeline_items_pipeline_id", table_name="pipeline_items")
    op.drop_table("pipeline_items")
    op.drop_index("ix_pipelines_status", table_name="pipelines")
    op.drop_index("ix_pipelines_session_id", table_name="pipelines")
    op.drop_table("pipelines")
    op.drop_table("pipeline_templates")
