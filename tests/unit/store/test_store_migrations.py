"""Migrations: the migrated schema is exactly the models' schema, on both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlmodel import SQLModel

import octipusd
from octipusd.errors import StoreError
from octipusd.store import Store, make_engine, upgrade
from octipusd.store.migrate import HEAD_REVISION, MIGRATIONS_DIR, current_revision, head_revision

EXPECTED_TABLES = {
    "sessions",
    "runs",
    "run_events",
    "vendor_sessions",
    "approvals",
    "work_plans",
    "plan_feedback",
    "models",
    "permission_rules",
    "tool_actions",
    "action_receipts",
    "tool_invocations",
    "pipeline_templates",
    "pipelines",
    "pipeline_items",
    "pipeline_nodes",
    "pipeline_attempts",
    "pipeline_events",
    "permission_grants",
    "spaces",
    "space_members",
    "session_messages",
    "session_checkpoints",
    "vault_entries",
    "monitors",
    "schedules",
    "schedule_firings",
}


def _diff(engine: sa.Engine, metadata: sa.MetaData) -> list[Any]:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(context, metadata))


def test_migrated_schema_equals_the_models(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        assert current_revision(engine) is None
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        assert set(sa.inspect(engine).get_table_names()) == EXPECTED_TABLES | {"alembic_version"}
        assert _diff(engine, SQLModel.metadata) == []
    finally:
        engine.dispose()


def test_comparison_detects_a_difference(store_url: str) -> None:
    """Guards the test above: a model change the migrations lack must show up as a diff."""
    engine = make_engine(store_url)
    try:
        upgrade(engine)
        changed = sa.MetaData()
        for table in SQLModel.metadata.sorted_tables:
            table.to_metadata(changed)
        changed.tables["runs"].append_column(sa.Column("extra", sa.Integer, nullable=True))
        changed.tables["runs"].c.owner.type = sa.String(10)
        diffs = _diff(engine, changed)
        assert any(d[0] == "add_column" and d[3].name == "extra" for d in diffs), diffs
        flat = [d for group in diffs if isinstance(group, list) for d in group]
        assert any(d[0] == "modify_type" and d[3] == "owner" for d in flat), diffs
    finally:
        engine.dispose()


def test_upgrade_is_idempotent_and_accepts_a_url(store_url: str) -> None:
    upgrade(store_url)
    upgrade(store_url)
    engine = make_engine(store_url)
    try:
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()


def test_a_database_from_a_newer_octipusd_is_refused(store_url: str) -> None:
    upgrade(store_url)
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    finally:
        engine.dispose()
    with pytest.raises(StoreError, match="newer octipusd"):
        Store.open(store_url)


def test_migrations_ship_inside_the_package() -> None:
    package_dir = Path(octipusd.__file__).resolve().parent
    assert MIGRATIONS_DIR.is_relative_to(package_dir)
    assert (MIGRATIONS_DIR / "env.py").is_file()
    assert (MIGRATIONS_DIR / "script.py.mako").is_file()
    assert (MIGRATIONS_DIR / "versions" / "0001_initial.py").is_file()
    assert not list(package_dir.parent.glob("alembic.ini"))


def test_the_head_revision_known_without_alembic_is_alembics_head() -> None:
    """A daemon on an up-to-date database skips Alembic by comparing with HEAD_REVISION."""
    assert head_revision() == HEAD_REVISION
