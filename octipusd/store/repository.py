"""The store: every read and write of Octipus's durable state.

:class:`Store` is synchronous and thread-safe; the daemon calls it through
``anyio.to_thread.run_sync``. Each method is one database transaction that has committed
when the method returns (an event is durable once :meth:`Store.append_event` returns), and
a failing method leaves nothing half-written.

Concurrency: on SQLite, writes are serialised by a process-wide lock and start with
``BEGIN IMMEDIATE``. On PostgreSQL, methods that allocate a counter (turn index) or upsert lock
the parent row (``SELECT ... FOR NO KEY UPDATE``) first, and "exactly once" state changes
(approval decisions, first terminal run status) are single conditional ``UPDATE`` statements.
Event sequence numbers are assigned in memory under the store's event lock (one daemon owns a
database; ``event_store.py``).

Errors: a missing record raises :class:`~octipusd.errors.NotFoundError` naming the id; a
database failure raises :class:`~octipusd.errors.StoreError` (past a timeout
:class:`~octipusd.errors.DatabaseTimeoutError`); a bad argument a client may send (a malformed
field, a JSON payload that is not an object, a limit below 1, an unknown status) raises
:class:`~octipusd.errors.InvalidRequestError`, and a caller's misuse (an unknown field, a
status that method does not set) ``ValueError``, a bug.

The methods live in one module per aggregate, each a mixin of :class:`Store`: sessions
(``session_store.py``), work plans and their feedback (``plan_store.py``), model rows (``model_row_store.py``), runs and events
(``run_store.py``, ``event_store.py``), approvals (``approval_store.py``), policy and spaces (``policy_store.py``),
the action journal (``journal_store.py``), the recovery of uncertain actions
(``recovery_store.py``), calls started by hand (``invocation_store.py``), session reuse
(``reuse_store.py``), the start of a turn's reads (``turn_store.py``), usage reports
(``usage_store.py``), the vault's entries (``vault_store.py``) and pipelines (``pipeline_store.py``,
``pipeline_item_store.py``, ``pipeline_attempt_store.py``, ``pipeline_template_store.py``), monitors
(``monitor_store.py``) and schedules (``schedule_store.py``). This module holds the class
itself: opening, closing, and :meth:`Store._tx` (and :meth:`Store._core`, its Core twin), the one
place a database error becomes an Octipus error. That error's message says what failed and the
driver's error class, never the database's URL, host, socket or files, nor the driver's own text
(which may name them): those are logged here, with the traceback (issue 26 item 6). (An Octipus
error raised inside a statement, a column type's refusal, keeps its own message.)
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError, TimeoutError as PoolTimeoutError
from sqlalchemy.pool import StaticPool
from sqlmodel import Session as DbSession

from octipusd.errors import DatabaseTimeoutError, OctipusError, StoreError
from octipusd.store.approval_store import APPROVAL_KINDS, SYSTEM_ACTOR, ApprovalStoreMixin
from octipusd.store.codec import utcnow
from octipusd.store.engine import TRANSCRIPT_OPTION, WRITE_OPTION, DatabaseTimeouts, display_url, make_engine
from octipusd.store.event_store import EventStoreMixin
from octipusd.store.invocation_store import InvocationStoreMixin
from octipusd.store.journal_store import JournalStoreMixin
from octipusd.store.migrate import upgrade
from octipusd.store.model_row_store import MODEL_ROW_UPDATABLE_FIELDS, ModelRowStoreMixin
from octipusd.store.monitor_store import MonitorStoreMixin
from octipusd.store.pipeline_attempt_store import PipelineAttemptStoreMixin
from octipusd.store.pipeline_item_store import PipelineItemStoreMixin
from octipusd.store.pipeline_template_store import PipelineTemplateStoreMixin
from octipusd.store.plan_store import PlanStoreMixin
from octipusd.store.policy_store import PolicyStoreMixin
from octipusd.store.policy_view import PolicyView
from octipusd.store.recovery_store import RecoveryStoreMixin
from octipusd.store.reuse_store import ReuseStoreMixin
from octipusd.store.run_store import RUN_UPDATABLE_FIELDS, RunStoreMixin
from octipusd.store.schedule_store import ScheduleStoreMixin
from octipusd.store.session_store import SessionStoreMixin
from octipusd.store.turn_store import TurnStoreMixin
from octipusd.store.usage_store import UsageStoreMixin
from octipusd.store.vault_store import VaultStoreMixin

__all__ = ["APPROVAL_KINDS", "MODEL_ROW_UPDATABLE_FIELDS", "RUN_UPDATABLE_FIELDS", "SYSTEM_ACTOR", "Store"]

log = logging.getLogger("octipusd.store")

#: What a database failure's message ends with: where its detail is (never in the message).
SEE_THE_LOG = "the octipusd log has the details"


class Store(
    SessionStoreMixin,
    PlanStoreMixin,
    ModelRowStoreMixin,
    RunStoreMixin,
    EventStoreMixin,
    ApprovalStoreMixin,
    PolicyStoreMixin,
    JournalStoreMixin,
    RecoveryStoreMixin,
    InvocationStoreMixin,
    ReuseStoreMixin,
    TurnStoreMixin,
    UsageStoreMixin,
    VaultStoreMixin,
    PipelineItemStoreMixin,
    PipelineAttemptStoreMixin,
    PipelineTemplateStoreMixin,
    MonitorStoreMixin,
    ScheduleStoreMixin,
):
    """Synchronous, thread-safe access to sessions, runs, events, approvals and plans.

    Sessions and work plans come from :class:`~octipusd.store.session_store.SessionStoreMixin`,
    model rows from :class:`~octipusd.store.model_row_store.ModelRowStoreMixin`, runs and events
    from :class:`~octipusd.store.run_store.RunStoreMixin`, approvals from
    :class:`~octipusd.store.approval_store.ApprovalStoreMixin`, policy and spaces from
    :class:`~octipusd.store.policy_store.PolicyStoreMixin`, the
    action journal from :class:`~octipusd.store.journal_store.JournalStoreMixin`, the recovery of
    uncertain actions from :class:`~octipusd.store.recovery_store.RecoveryStoreMixin`, calls started
    by hand from :class:`~octipusd.store.invocation_store.InvocationStoreMixin`, and session
    reuse (vendor sessions, transcript, checkpoints, ``/clear``) from
    :class:`~octipusd.store.reuse_store.ReuseStoreMixin`, and the start of a turn's reads from
    :class:`~octipusd.store.turn_store.TurnStoreMixin`.

    Build it with :meth:`open` (creates the engine and migrates), or from an engine whose
    schema is already migrated.

    Args:
        engine: An engine from :func:`~octipusd.store.engine.make_engine`. The store owns it
            and disposes of it in :meth:`close`.
        clock: Returns the current time as an aware UTC datetime; defaults to the system
            clock. Tests pass a fake one.
        timeouts: The timeouts ``engine`` was made with (see
            :func:`~octipusd.store.engine.make_engine`); None for the defaults. On SQLite the
            statement timeout also bounds the wait for the store's own write lock.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], datetime] | None = None,
        timeouts: DatabaseTimeouts | None = None,
    ) -> None:
        self._engine = engine
        self._clock = clock or utcnow
        self._timeouts = timeouts or DatabaseTimeouts()
        self._sqlite = engine.dialect.name == "sqlite"
        # An in-memory SQLite database is one connection shared by all threads: serialise
        # every transaction on it, not only writes.
        self._serialize_reads = self._sqlite and isinstance(engine.pool, StaticPool)
        self._write_lock = threading.Lock()
        self._policy_view = PolicyView()
        self._closed = False
        self._init_event_log()

    def now(self) -> datetime:
        """The store's clock (aware UTC): the time its records are written with."""
        return self._clock()

    @classmethod
    def open(
        cls,
        url: str,
        *,
        clock: Callable[[], datetime] | None = None,
        timeouts: DatabaseTimeouts | None = None,
    ) -> Store:
        """Create the engine for ``url``, migrate the schema to the newest revision, return a store.

        Args:
            url: ``sqlite:///<path>`` or ``postgresql+psycopg://...``.
            clock: See the class docstring.
            timeouts: The connect and statement timeouts; None for the defaults.

        Returns:
            An open store.

        Raises:
            StoreError: The URL is unsupported, or the database cannot be reached or migrated.
        """
        engine = make_engine(url, timeouts=timeouts)
        try:
            upgrade(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, clock=clock, timeouts=timeouts)

    def close(self) -> None:
        """Close every pooled connection. Further calls raise StoreError. Idempotent."""
        self._closed = True
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def url_for_display(self) -> str:
        """The database URL without its password."""
        return display_url(self._engine.url)

    @property
    def engine(self) -> Engine:
        """The underlying SQLAlchemy engine (for migrations and diagnostics only)."""
        return self._engine

    # Transactions ------------------------------------------------------------------------

    @contextmanager
    def _tx(self, what: str, *, write: bool = False, transcript: bool = False) -> Iterator[DbSession]:
        """One transaction: committed on normal exit (writes), rolled back on an exception.

        ``transcript`` (a write of run events only) commits without waiting for the disk
        (:data:`~octipusd.store.engine.TRANSCRIPT_OPTION`).

        The one place a database failure becomes an Octipus error: a statement (or the wait for
        a lock, a connection or the store's SQLite write lock) past its timeout raises
        :class:`~octipusd.errors.DatabaseTimeoutError`, any other failure
        :class:`~octipusd.errors.StoreError`; either way nothing of the transaction remains.
        """
        with (
            self._guarded(what, write),
            DbSession(self._engine, expire_on_commit=False, autoflush=False) as db,
        ):
            if write:
                conn = db.connection(execution_options={WRITE_OPTION: True, TRANSCRIPT_OPTION: transcript})
                if transcript and not self._sqlite:
                    conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
            yield db
            if write:
                db.commit()

    @contextmanager
    def _core(
        self, what: str, *, write: bool = False, single: bool = False, transcript: bool = False
    ) -> Iterator[Connection]:
        """As :meth:`_tx`, on a SQLAlchemy Core connection (no ORM session): for hot paths.

        Args:
            what: What the transaction does, for error messages.
            write: It writes (on SQLite: the store's write lock and ``BEGIN IMMEDIATE``).
            single: The block runs exactly one statement. PostgreSQL then runs it without
                ``BEGIN`` and ``COMMIT`` (one statement is atomic and durable by itself: one
                round trip instead of three); on SQLite it is an ordinary transaction.
            transcript: A write of run events only: its commit does not wait for the disk
                (:data:`~octipusd.store.engine.TRANSCRIPT_OPTION`).
        """
        if single and transcript:  # SET LOCAL outside a transaction does nothing on PostgreSQL
            raise ValueError("a transcript write is a transaction of its own, not a single statement")
        options: dict[str, Any] = {WRITE_OPTION: True, TRANSCRIPT_OPTION: transcript} if write else {}
        if single and not self._sqlite:
            options["isolation_level"] = "AUTOCOMMIT"
        with (
            self._guarded(what, write),
            self._engine.connect().execution_options(**options) as conn,
            conn.begin(),
        ):
            if transcript and not self._sqlite:
                conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
            yield conn

    @contextmanager
    def _guarded(self, what: str, write: bool) -> Iterator[None]:
        """The store's lock (SQLite writes, or every call on an in-memory database) and the
        translation of database failures for one transaction (see :meth:`_tx`)."""
        if self._closed:
            raise StoreError(f"the store is closed (while {what})")
        serialize = (write and self._sqlite) or self._serialize_reads
        if serialize and not self._write_lock.acquire(timeout=self._timeouts.statement_seconds):
            raise self._timed_out(what, "another transaction of this daemon held the database")
        try:
            yield
        except SQLAlchemyError as exc:
            detail = getattr(exc, "orig", None) or exc
            kind = type(detail).__name__
            # the driver's text may name the database's host, socket, files or values: logged only
            # (a constraint's refusal, which a caller may handle, without its traceback)
            expected = isinstance(exc, IntegrityError)
            log.log(
                logging.INFO if expected else logging.WARNING,
                "database error while %s in %s: %s: %s",
                what,
                self.url_for_display,
                kind,
                detail,
                exc_info=None if expected else exc,
            )
            if _is_timeout(exc, detail):
                raise self._timed_out(what, f"{kind}; {SEE_THE_LOG}") from exc
            if isinstance(detail, OctipusError):  # Octipus's own (a column type's refusal): shown as is
                raise StoreError(f"database error while {what}: {kind}: {detail.message}") from exc
            raise StoreError(f"database error while {what}: {kind}; {SEE_THE_LOG}") from exc
        finally:
            if serialize:
                self._write_lock.release()

    def _timed_out(self, what: str, detail: str) -> DatabaseTimeoutError:
        bounds = self._timeouts
        return DatabaseTimeoutError(
            f"the database did not answer in time while {what} ({detail}); "
            f"nothing of it was written. The bounds are database.statementTimeoutSeconds = "
            f"{bounds.statement_seconds:g} s and database.connectTimeoutSeconds = {bounds.connect_seconds} s: "
            "find what holds the database (a long transaction, another process), or raise them"
        )


def _is_timeout(exc: SQLAlchemyError, detail: object) -> bool:
    """Whether a database failure is a timeout: a PostgreSQL statement cancelled by
    ``statement_timeout`` or a connection attempt past ``connect_timeout``, SQLite busy or locked
    past its busy timeout, or no pooled connection free in time."""
    if isinstance(exc, PoolTimeoutError):
        return True
    if isinstance(detail, sqlite3.OperationalError):
        return detail.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    import psycopg  # loaded by the PostgreSQL dialect already; a SQLite daemon starts without it

    return isinstance(detail, psycopg.errors.QueryCanceled | psycopg.errors.ConnectionTimeout)
