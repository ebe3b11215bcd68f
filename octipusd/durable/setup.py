"""Preparing DBOS Transact for the durable engine: the system database's URL, its migration, the
configuration and the registry of workflow functions (blocking; run in a worker thread by
:class:`~octipusd.durable.engine.DurableEngine`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from octipusd.errors import ConfigError, StoreError

if TYPE_CHECKING:
    from octipusd.durable.engine import EngineLimits, WorkflowDef

#: The DBOS application name.
ENGINE_APP_NAME = "octipus"
#: The system database file beside Octipus's SQLite database.
SQLITE_FILE_NAME = "octipus-engine.sqlite"
#: The suffix of the system database's name beside Octipus's PostgreSQL database.
POSTGRES_DATABASE_SUFFIX = "_dbos"
#: Workflow functions applied to DBOS's process-global registry, by name.
REGISTERED: dict[str, Callable[..., Any]] = {}


def system_database_url(store_url: str) -> str:
    """DBOS's system database beside Octipus's own database.

    ``sqlite:///DIR/octipus.db`` gives ``sqlite:///DIR/octipus-engine.sqlite``; a PostgreSQL URL gives
    the same server and role with the database ``<name>_dbos`` (DBOS creates it when the role has
    CREATEDB). An in-memory store gives ``sqlite://``, which :meth:`DurableEngine.ensure_started`
    refuses (the engine needs a file).
    """
    url = make_url(store_url)
    if url.get_backend_name() == "sqlite":
        if in_memory(store_url):
            return "sqlite://"
        return f"sqlite:///{Path(str(url.database)).with_name(SQLITE_FILE_NAME)}"
    engine_url = url.set(
        drivername="postgresql+psycopg", database=f"{url.database}{POSTGRES_DATABASE_SUFFIX}"
    )
    return engine_url.render_as_string(hide_password=False)


def in_memory(url: str) -> bool:
    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def display_url(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def prepare(url: str, workflows: Sequence[WorkflowDef[Any, Any]], config: Any) -> None:
    """Import dbos, create or migrate the system database, register ``workflows`` and build the
    DBOS singleton from ``config``: all but the launch (blocking; in a worker thread).

    Raises:
        ConfigError, StoreError: as :func:`_migrate`.
    """
    migrate_system_database(url)
    from dbos import DBOS

    register_workflows(workflows)
    DBOS(config=config)


def migrate_system_database(url: str) -> None:
    """Create or migrate the system database (blocking).

    Raises:
        ConfigError: PostgreSQL: the database does not exist and the role cannot create it.
        StoreError: any other failure to reach or migrate it.
    """
    from dbos import DBOS

    try:
        DBOS.migrate(url)
    except Exception as exc:
        parsed = make_url(url)
        if parsed.get_backend_name() == "postgresql" and _missing_database(exc):
            raise ConfigError(
                f"the durable engine's database {parsed.database!r} does not exist on the PostgreSQL server and "
                f"the role {parsed.username or '(default)'!r} cannot create it: create it "
                f"(CREATE DATABASE {parsed.database} OWNER <the role>) or grant the role CREATEDB"
            ) from exc
        raise StoreError(f"the durable engine cannot prepare its database {display_url(url)}: {exc}") from exc


def _missing_database(exc: BaseException) -> bool:
    text = str(exc)
    return "does not exist" in text and "database" in text


def config_dict(url: str, app_version: str, limits: EngineLimits) -> Any:
    """The DBOS configuration (a ``DBOSConfig`` dict)."""
    config: dict[str, Any] = {
        "name": ENGINE_APP_NAME,
        "system_database_url": url,
        "application_version": app_version,
        "run_migrations": False,  # done by _migrate, off the loop
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": limits.notification_poll_seconds,
        "scheduler_polling_interval_sec": limits.scheduler_poll_seconds,
    }
    if make_url(url).get_backend_name() == "postgresql":
        config["db_engine_kwargs"] = {
            "pool_size": 5,
            "max_overflow": 5,
            "pool_timeout": 30,
            "pool_pre_ping": True,
            "connect_args": {"connect_timeout": limits.connect_timeout_seconds},
        }
    return config


def register_workflows(workflows: Sequence[WorkflowDef[Any, Any]]) -> None:
    """Apply ``DBOS.workflow`` to each workflow not yet registered in this process."""
    from dbos import DBOS

    for workflow in workflows:
        if workflow.name not in REGISTERED:
            REGISTERED[workflow.name] = DBOS.workflow(name=workflow.name)(workflow.fn)


def destroy() -> None:
    from dbos import DBOS

    DBOS.destroy()
