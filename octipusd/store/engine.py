"""Database engines: SQLite (embedded default) or PostgreSQL (``postgresql+psycopg://``).

SQLite connections run in WAL mode with ``synchronous=FULL`` (a committed row survives a
power cut), foreign keys enforced and a busy timeout. A transaction started with
:data:`TRANSCRIPT_OPTION` (run events only) commits without waiting for the disk: ``synchronous=NORMAL``
on SQLite, ``synchronous_commit = off`` on PostgreSQL (see :data:`TRANSCRIPT_OPTION`). Every engine is bounded by its
:class:`DatabaseTimeouts` (settings ``database.connectTimeoutSeconds`` and
``database.statementTimeoutSeconds``): on SQLite the statement timeout is the busy timeout, on
PostgreSQL libpq's ``connect_timeout`` and the server's ``statement_timeout``. pysqlite's own implicit transaction
handling is switched off and Octipus emits ``BEGIN`` itself, so a write transaction can ask
for ``BEGIN IMMEDIATE`` (execution option :data:`WRITE_OPTION`) and never fails half-way
on a lock upgrade.
"""

from __future__ import annotations

import math
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from octipusd.errors import StoreError
from octipusd.settings import (
    DATABASE_CONNECT_TIMEOUT_SECONDS,
    DATABASE_STATEMENT_TIMEOUT_SECONDS,
    DatabaseSettings,
)

__all__ = [
    "ACCEPTED_SCHEMES",
    "TRANSCRIPT_OPTION",
    "WRITE_OPTION",
    "DatabaseTimeouts",
    "default_sqlite_url",
    "display_url",
    "is_sqlite",
    "make_engine",
    "parse_url",
    "private_parts",
    "sqlite_file",
    "sqlite_path",
]

#: URL schemes (SQLAlchemy driver names) the store accepts.
ACCEPTED_SCHEMES: tuple[str, ...] = ("sqlite", "sqlite+pysqlite", "postgresql+psycopg")


@dataclass(frozen=True, slots=True)
class DatabaseTimeouts:
    """The bounds of every database call (settings ``database.*TimeoutSeconds``).

    Attributes:
        connect_seconds: PostgreSQL: how long connecting to the server may take, in whole
            seconds (libpq ``connect_timeout``); also how long a call waits for a pooled
            connection. SQLite opens a local file and has no connect timeout.
        statement_seconds: How long one statement may take, waiting for a lock included, in
            seconds: PostgreSQL ``statement_timeout``; SQLite ``busy_timeout`` (how long a
            write waits for another writer) and the wait for the store's own write lock.
    """

    connect_seconds: int = DATABASE_CONNECT_TIMEOUT_SECONDS
    statement_seconds: float = DATABASE_STATEMENT_TIMEOUT_SECONDS

    @classmethod
    def from_settings(cls, settings: DatabaseSettings) -> DatabaseTimeouts:
        """The timeouts an operator configured in the ``database`` section."""
        return cls(
            connect_seconds=settings.connectTimeoutSeconds, statement_seconds=settings.statementTimeoutSeconds
        )

    @property
    def statement_ms(self) -> int:
        """:attr:`statement_seconds` in whole milliseconds (at least 1), as the databases take it."""
        return max(1, math.ceil(self.statement_seconds * 1000))

    def postgres_connect_args(self, url: URL) -> dict[str, Any]:
        """libpq connection parameters: ``connect_timeout``, and ``statement_timeout`` added to the
        ``options`` the URL may already carry."""
        given = url.query.get("options")
        options = [given] if isinstance(given, str) else list(given or ())
        options.append(f"-c statement_timeout={self.statement_ms}")
        return {"connect_timeout": self.connect_seconds, "options": " ".join(options)}


#: Connection execution option: when true, the SQLite transaction starts with
#: ``BEGIN IMMEDIATE`` (takes the write lock up front). Ignored on PostgreSQL.
WRITE_OPTION = "octipus_write"
#: Connection execution option: when true, the transaction's commit does not wait for the disk
#: (SQLite ``synchronous=NORMAL`` in WAL mode, PostgreSQL ``SET LOCAL synchronous_commit = off``). Its
#: rows survive a crash of the daemon (SIGKILL included) and are on disk after the next commit of any
#: other transaction, or within a fraction of a second; an OS crash or power cut may lose the last
#: of them. Only run events use it (DESIGN.md "Persistence"); every other table commits with
#: ``synchronous=FULL``.
TRANSCRIPT_OPTION = "octipus_transcript"


def default_sqlite_url() -> str:
    """Return the default database URL, ``sqlite:///$XDG_DATA_HOME/octipus/octipus.db``.

    ``XDG_DATA_HOME`` defaults to ``~/.local/share`` when unset or empty (or not absolute,
    as the XDG specification says).

    Returns:
        A ``sqlite:///`` URL with an absolute path.
    """
    data_home = os.environ.get("XDG_DATA_HOME", "")
    base = Path(data_home) if data_home and os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return f"sqlite:///{base / 'octipus' / 'octipus.db'}"


def display_url(url: str | URL) -> str:
    """Return ``url`` with any password removed, safe to show and log.

    Args:
        url: A database URL (string or SQLAlchemy ``URL``). A malformed string is returned
            as ``"<invalid database URL>"`` rather than echoed (it may hold a password).

    Returns:
        The URL as a string without the password.
    """
    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except ArgumentError:
        return "<invalid database URL>"
    return parsed._replace(password=None).render_as_string(hide_password=False)


def parse_url(url: str) -> URL:
    """Parse and validate a database URL.

    Args:
        url: ``sqlite:///<path>`` (``sqlite://`` alone is an in-memory database) or
            ``postgresql+psycopg://user[:password]@host[:port]/dbname[?...]``.

    Returns:
        The parsed SQLAlchemy ``URL``.

    Raises:
        StoreError: The URL is malformed or its scheme is not one of :data:`ACCEPTED_SCHEMES`.
    """
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(
            "the database URL is malformed; expected sqlite:///<path> or "
            "postgresql+psycopg://user@host/dbname"
        ) from exc
    if parsed.drivername not in ACCEPTED_SCHEMES:
        accepted = ", ".join(f"{s}://" for s in ACCEPTED_SCHEMES)
        raise StoreError(
            f"unsupported database URL scheme {parsed.drivername + '://'!r} in {display_url(parsed)}; "
            f"accepted schemes: {accepted}"
        )
    return parsed


def is_sqlite(url: URL) -> bool:
    """Return True when ``url`` (already parsed) names a SQLite database."""
    return url.get_backend_name() == "sqlite"


def sqlite_path(url: URL) -> Path | None:
    """Return the absolute file path of a SQLite URL, or None for an in-memory database."""
    database = url.database
    if not database or database == ":memory:":
        return None
    return Path(database).expanduser().absolute()


def private_parts(url: str) -> tuple[tuple[str, str], ...]:
    """What of a database URL no answer of the API may show, each ``(what, text)``: the URL (as
    given, as rendered, without its password), its password, the folders of its Unix sockets (a
    PostgreSQL ``host`` that is a path) and a SQLite URL's database file. A malformed URL is private
    whole.
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        return (("database URL", url),)
    parts = [
        ("database URL", url),
        ("database URL", parsed.render_as_string(hide_password=False)),
        ("database URL", display_url(parsed)),
    ]
    if parsed.password:
        parts.append(("database password", str(parsed.password)))
    given = parsed.query.get("host", ())
    hosts = [parsed.host or "", *((given,) if isinstance(given, str) else given)]
    parts += [("database socket", host) for host in hosts if host.startswith("/") and host != "/"]
    if (path := sqlite_path(parsed) if is_sqlite(parsed) else None) is not None:
        parts.append(("database file", str(path)))
    return tuple(dict.fromkeys(parts))


def sqlite_file(url: str) -> Path | None:
    """The database file ``url`` names when it is a SQLite URL with a file, else None (another
    backend, an in-memory database, or not a URL at all: opening the store reports that one)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    return sqlite_path(parsed) if is_sqlite(parsed) else None


def make_engine(url: str, *, timeouts: DatabaseTimeouts | None = None) -> Engine:
    """Create a thread-safe SQLAlchemy engine for ``url``.

    For SQLite the database's parent folder is created (mode 0700) and a new database file
    is created with mode 0600. Every connection gets ``journal_mode=WAL``,
    ``synchronous=FULL``, ``foreign_keys=ON`` and ``busy_timeout`` (the statement timeout). The connection may be
    used from any thread (``check_same_thread=False``). ``sqlite://`` (no path) gives one
    shared in-memory database, for tests.

    For PostgreSQL (``postgresql+psycopg://``) connections are pre-pinged on checkout, and get
    libpq's ``connect_timeout`` and the server's ``statement_timeout``.

    Args:
        url: The database URL; see :func:`parse_url`.
        timeouts: The connect and statement timeouts; None for the defaults.

    Returns:
        The engine. Call ``dispose()`` when done.

    Raises:
        StoreError: The URL is invalid or unsupported, or the SQLite folder cannot be created.
    """
    bounds = timeouts or DatabaseTimeouts()
    parsed = parse_url(url)
    if not is_sqlite(parsed):
        return create_engine(
            parsed,
            pool_pre_ping=True,
            pool_timeout=bounds.connect_seconds,
            connect_args={
                "application_name": f"octipusd pid={os.getpid()}",
                **bounds.postgres_connect_args(parsed),
            },
        )

    path = sqlite_path(parsed)
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False}}
    if path is None:
        kwargs["poolclass"] = StaticPool
    else:
        _prepare_sqlite_file(path)
        parsed = parsed.set(database=str(path))
    engine = create_engine(parsed, **kwargs)
    _install_sqlite_hooks(engine, bounds.statement_ms)
    return engine


def _prepare_sqlite_file(path: Path) -> None:
    try:
        if not path.parent.exists():
            path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
        if not path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    except OSError as exc:
        raise StoreError(f"cannot create the SQLite database {path}: {exc.strerror or exc}") from exc


#: Key in a SQLite connection's ``info``: the ``synchronous`` mode it is in.
_SYNCHRONOUS = "octipus_synchronous"


def _install_sqlite_hooks(engine: Engine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, record: ConnectionPoolEntry) -> None:
        # Octipus emits BEGIN itself (see _on_begin); pysqlite must not.
        dbapi_connection.isolation_level = None
        record.info[_SYNCHRONOUS] = "FULL"
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = FULL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        synchronous = "NORMAL" if options.get(TRANSCRIPT_OPTION) else "FULL"
        if conn.info.get(_SYNCHRONOUS) != synchronous:  # a pragma, so outside the transaction
            conn.exec_driver_sql(f"PRAGMA synchronous = {synchronous}")
            conn.info[_SYNCHRONOUS] = synchronous
        conn.exec_driver_sql("BEGIN IMMEDIATE" if options.get(WRITE_OPTION) else "BEGIN")
