"""Alembic environment of the Octipus store.

Run through :func:`octipusd.store.migrate.upgrade` (no ``alembic.ini`` needed): it passes an
open connection in ``config.attributes["connection"]``. When run by the ``alembic`` command
instead, the URL comes from the ``sqlalchemy.url`` option or ``OCTIPUS_DATABASE_URL``.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

import octipusd.store.models  # noqa: F401  (registers the tables on SQLModel.metadata)
from octipusd.store.engine import WRITE_OPTION, default_sqlite_url, make_engine

target_metadata = SQLModel.metadata


def _url() -> str:
    return (
        context.config.get_main_option("sqlalchemy.url")
        or os.environ.get("OCTIPUS_DATABASE_URL")
        or default_sqlite_url()
    )


def _run_with(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    """Emit the migration SQL without a database (``alembic upgrade --sql``)."""
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Migrate through the given connection, or one opened from the configured URL."""
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run_with(connection)
        return
    engine = make_engine(_url())
    try:
        with engine.connect() as conn:
            _run_with(conn.execution_options(**{WRITE_OPTION: True}))
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
