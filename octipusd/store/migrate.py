"""Schema migrations (Alembic), run programmatically at daemon start.

The migration scripts live inside the package (``octipusd/store/migrations``) so they ship
in the wheel; no ``alembic.ini`` is needed at run time. To write a new revision during
development::

    python -c "from octipusd.store.migrate import alembic_config; \\
        from alembic import command; \\
        command.revision(alembic_config('sqlite:////tmp/x.db'), 'message', autogenerate=True)"

then rename the file to ``NNNN_<slug>.py`` and check it by hand (the migration test
compares the migrated schema with the models on SQLite and PostgreSQL).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from octipusd.errors import StoreError
from octipusd.store.engine import WRITE_OPTION, display_url, make_engine

if TYPE_CHECKING:  # Alembic is imported only when a database needs migrating
    from alembic.config import Config

__all__ = [
    "HEAD_REVISION",
    "MIGRATIONS_DIR",
    "alembic_config",
    "current_revision",
    "head_revision",
    "upgrade",
]

#: Folder of the Alembic environment (``env.py``, ``versions/``) inside the package.
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
#: The newest packaged revision, known without loading Alembic, so that a daemon starting on an
#: up-to-date database does not import it (the migration tests check it against
#: :func:`head_revision`: a new revision must update it).
HEAD_REVISION = "0015"

# Transaction-scoped advisory lock taken while migrating PostgreSQL, so two processes that
# start at once do not both run the same revision ("octimigr" as a 64-bit integer).
_PG_MIGRATION_LOCK_KEY = 0x6F6374696D696772


def alembic_config(url: str | None = None) -> Config:
    """Return an Alembic ``Config`` pointing at the packaged migrations.

    Args:
        url: Optional database URL put in the ``sqlalchemy.url`` option (used when the
            environment is run without a connection, e.g. by ``alembic`` commands).

    Returns:
        A ``Config`` with ``script_location`` set; no ini file is read.
    """
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def head_revision() -> str:
    """Return the newest revision id the packaged migrations know (e.g. ``"0001"``)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # pragma: no cover - the package always ships revisions
        raise StoreError(f"no migrations found in {MIGRATIONS_DIR}")
    return head


def current_revision(engine: Engine) -> str | None:
    """Return the database's schema revision, or None when it was never migrated.

    Raises:
        StoreError: The database cannot be read.
    """
    from alembic.runtime.migration import MigrationContext

    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot read the schema revision of {display_url(engine.url)}: {exc}") from exc


def upgrade(engine_or_url: Engine | str, revision: str = "head") -> None:
    """Migrate the database to ``revision`` (``alembic upgrade head``), in one transaction.

    Running it on an up-to-date database does nothing (its revision is read without importing
    Alembic). On PostgreSQL a transaction-level
    advisory lock keeps two processes from migrating at once, and the statement timeout is
    lifted for the migration's transaction; on SQLite the write transaction (``BEGIN
    IMMEDIATE``) keeps two processes apart.

    Args:
        engine_or_url: An engine from :func:`~octipusd.store.engine.make_engine`, or a URL
            (an engine is then made and disposed of).
        revision: Target revision; ``"head"`` for the newest.

    Raises:
        StoreError: The database cannot be reached or migrated, or its schema revision is
            unknown to this octipusd (a newer octipusd migrated it).
    """
    engine = make_engine(engine_or_url) if isinstance(engine_or_url, str) else engine_or_url
    if revision == "head" and _at_head(engine):
        if isinstance(engine_or_url, str):
            engine.dispose()
        return
    from alembic import command
    from alembic.util import CommandError

    shown = display_url(engine.url)
    config = alembic_config()
    try:
        with engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    # a migration may rewrite big tables: database.statementTimeoutSeconds bounds
                    # the daemon's calls, not this one transaction
                    conn.execute(text("SET LOCAL statement_timeout = 0"))
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK_KEY})
                config.attributes["connection"] = conn
                command.upgrade(config, revision)
    except CommandError as exc:
        raise StoreError(
            f"cannot migrate {shown}: {exc}; if a newer octipusd migrated this database, "
            "run that version or point OCTIPUS_DATABASE_URL elsewhere"
        ) from exc
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot migrate {shown}: {exc}") from exc
    finally:
        config.attributes.pop("connection", None)
        if isinstance(engine_or_url, str):
            engine.dispose()


def _at_head(engine: Engine) -> bool:
    """Whether the database's schema is at :data:`HEAD_REVISION`, read without Alembic.

    Any failure (no version table yet, an unreachable database) answers False: Alembic then
    migrates, or reports the failure.
    """
    try:
        with engine.connect() as conn:
            versions = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    except SQLAlchemyError:
        return False
    return list(versions) == [HEAD_REVISION]
