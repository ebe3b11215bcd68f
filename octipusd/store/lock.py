"""One active octipusd per database.

The seeds' guarantees (exact approval claims, journal recovery) assume a single daemon
owns a database, so the daemon takes this lock before migrating and holds it for its
whole lifetime:

* SQLite: an exclusive ``fcntl.flock`` on ``<database path>.lock``. The file holds
  ``{"pid": ..., "host": ..., "started_at": ...}`` so a second daemon can name the first.
  The kernel drops the lock when the process dies, however it dies.
* PostgreSQL: ``pg_try_advisory_lock`` on a fixed 64-bit key, on a dedicated connection
  kept open (autocommit, idle) for the daemon's lifetime, whose ``application_name`` is
  ``octipusd pid=<pid> host=<host>``. The server drops the lock when that connection ends.
  A competitor finds the holder through ``pg_locks`` joined with ``pg_stat_activity``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from octipusd.errors import DatabaseLockedError, StoreError
from octipusd.store.engine import DatabaseTimeouts, display_url, is_sqlite, parse_url, sqlite_path

__all__ = ["PG_LOCK_KEY", "DatabaseLock", "lock_file_path"]

#: The advisory lock key on PostgreSQL: the bytes ``b"octipusd"`` as a signed 64-bit integer.
PG_LOCK_KEY = int.from_bytes(b"octipusd", "big", signed=True)

_ADVICE = "stop that daemon or point OCTIPUS_DATABASE_URL elsewhere"
_APP_NAME = re.compile(r"^octipusd pid=(?P<pid>\d+) host=(?P<host>.*)$")


def lock_file_path(db_path: Path) -> Path:
    """Return the lock file used for the SQLite database at ``db_path`` (``<path>.lock``)."""
    return db_path.with_name(db_path.name + ".lock")


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")


class DatabaseLock:
    """Exclusive ownership of one database by one octipusd process.

    Use as a context manager, or call :meth:`acquire` and :meth:`release`. Not thread-safe:
    one owner object per daemon. Acquiring again while held does nothing.

    Args:
        url: The database URL (as given to :func:`~octipusd.store.engine.make_engine`). An
            in-memory SQLite database needs no lock; acquiring it always succeeds.
        timeouts: Bounds of the PostgreSQL lock connection (see
            :class:`~octipusd.store.engine.DatabaseTimeouts`); None for the defaults.

    Raises:
        StoreError: The URL is invalid or unsupported.
    """

    def __init__(self, url: str, *, timeouts: DatabaseTimeouts | None = None) -> None:
        self._url: URL = parse_url(url)
        self._timeouts = timeouts or DatabaseTimeouts()
        self._fd: int | None = None
        self._engine: Engine | None = None
        self._conn: Connection | None = None
        self._memory_held = False

    @property
    def url_for_display(self) -> str:
        """The database URL without its password."""
        return display_url(self._url)

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None or self._conn is not None or self._memory_held

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock without waiting.

        Raises:
            DatabaseLockedError: Another octipusd holds it. The message names the database
                (without password), the holder's pid, host and start time, and what to do.
            StoreError: The lock file or the database cannot be reached.
        """
        if self.held:
            return
        if is_sqlite(self._url):
            path = sqlite_path(self._url)
            if path is None:
                self._memory_held = True
            else:
                self._acquire_file(lock_file_path(path))
        else:
            self._acquire_advisory()

    def release(self) -> None:
        """Give the lock up. Does nothing when not held; never raises."""
        self._memory_held = False
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        if self._conn is not None:
            conn, self._conn = self._conn, None
            with contextlib.suppress(SQLAlchemyError):
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": PG_LOCK_KEY})
            with contextlib.suppress(SQLAlchemyError):
                conn.close()
        if self._engine is not None:
            engine, self._engine = self._engine, None
            engine.dispose()

    def verify(self) -> None:
        """Check that the lock is still held (PostgreSQL: the lock connection is alive).

        Raises:
            StoreError: The lock is not held, or the PostgreSQL connection holding it was
                lost (the server restarted or ended it): another daemon could take over, so
                the caller should stop.
        """
        if not self.held:
            raise StoreError(f"the lock on database {self.url_for_display} is not held")
        if self._conn is None:
            return
        try:
            row = self._conn.execute(
                text(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                    " AND pid = pg_backend_pid() AND objsubid = 1"
                    " AND classid::bigint = :hi AND objid::bigint = :lo"
                ),
                _key_parts(),
            ).scalar_one()
        except SQLAlchemyError as exc:
            raise StoreError(
                f"lost the connection holding the lock on {self.url_for_display}: {exc}"
            ) from exc
        if not row:
            raise StoreError(f"the advisory lock on {self.url_for_display} is no longer held")

    # SQLite ------------------------------------------------------------------------------

    def _acquire_file(self, path: Path) -> None:
        try:
            if not path.parent.exists():
                path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StoreError(f"cannot open the lock file {path}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DatabaseLockedError(self._file_holder_message(path)) from None
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"cannot lock {path}: {exc.strerror or exc}") from exc
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started_at": _iso(datetime.now(UTC))}
        try:
            payload = json.dumps(info).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, payload, 0)
            os.fsync(fd)
        except OSError as exc:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise StoreError(f"cannot write the lock file {path}: {exc.strerror or exc}") from exc
        self._fd = fd

    def _file_holder_message(self, path: Path) -> str:
        try:
            info: Any = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            info = None
        if isinstance(info, dict) and "pid" in info:
            holder = (
                f"octipusd pid {info.get('pid')} on host {info.get('host', '?')}"
                f" since {info.get('started_at', '?')}"
            )
        else:
            holder = f"another octipusd (its lock file {path} names no holder yet)"
        return f"database {self.url_for_display} is in use by {holder}; {_ADVICE}"

    # PostgreSQL --------------------------------------------------------------------------

    def _acquire_advisory(self) -> None:
        app_name = f"octipusd pid={os.getpid()} host={socket.gethostname()}"[:63]
        engine = create_engine(
            self._url,
            poolclass=NullPool,
            connect_args={"application_name": app_name, **self._timeouts.postgres_connect_args(self._url)},
        )
        try:
            conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        except SQLAlchemyError as exc:
            engine.dispose()
            raise StoreError(f"cannot connect to {self.url_for_display} to take its lock: {exc}") from exc
        try:
            got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": PG_LOCK_KEY}).scalar_one()
            if not got:
                message = self._advisory_holder_message(conn)
                raise DatabaseLockedError(message)
        except BaseException as exc:
            with contextlib.suppress(SQLAlchemyError):
                conn.close()
            engine.dispose()
            if isinstance(exc, SQLAlchemyError):
                raise StoreError(f"cannot take the lock on {self.url_for_display}: {exc}") from exc
            raise
        self._engine, self._conn = engine, conn

    def _advisory_holder_message(self, conn: Connection) -> str:
        row = (
            conn.execute(
                text(
                    "SELECT a.pid, a.application_name, a.client_hostname, a.backend_start"
                    " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
                    " AND l.classid::bigint = :hi AND l.objid::bigint = :lo"
                    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                    " LIMIT 1"
                ),
                _key_parts(),
            )
            .mappings()
            .first()
        )
        if row is None:
            holder = "another octipusd (it released the lock just now; try again)"
        else:
            since = _iso(row["backend_start"]) if row["backend_start"] is not None else "?"
            match = _APP_NAME.match(row["application_name"] or "")
            if match:
                holder = f"octipusd pid {match['pid']} on host {match['host']} since {since}"
            else:
                app = row["application_name"] or "?"
                client = row["client_hostname"] or "local"
                holder = (
                    f"another client (PostgreSQL backend pid {row['pid']}, application {app!r}, "
                    f"host {client}) since {since}"
                )
        return f"database {self.url_for_display} is in use by {holder}; {_ADVICE}"


def _key_parts() -> dict[str, int]:
    unsigned = PG_LOCK_KEY & 0xFFFFFFFFFFFFFFFF
    return {"hi": unsigned >> 32, "lo": unsigned & 0xFFFFFFFF}
