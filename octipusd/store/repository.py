"""The store: every read and write of Octipus's durable state.

:class:`Store` is synchronous and thread-safe; the daemon calls it through
``anyio.to_thread.run_sync``. Each method is one database transaction that has committed
when the method returns (an event is durable once :meth:`Store.append_event` returns), and
a failing method leaves nothing half-written.

Concurrency: on SQLite, writes are serialised by a process-wide lock and start with
``BEGIN IMMEDIATE``. On PostgreSQL, methods that allocate a counter (turn index, event
sequence) or upsert lock the parent row (``SELECT ... FOR NO KEY UPDATE``) first, and
"exactly once" state changes (approval decisions, first terminal run status) are single
conditional ``UPDATE`` statements.

Errors: a missing record raises :class:`~octipusd.errors.NotFoundError` naming the id; a
database failure raises :class:`~octipusd.errors.StoreError`; bad arguments raise
``ValueError`` (or ``TypeError`` for a JSON payload that is not a ``dict``).

Session reuse (vendor session records, the session transcript, compaction checkpoints and
``/clear`` generations) lives in ``reuse_store.py``, whose refusals of bad arguments raise
:class:`~octipusd.errors.InvalidRequestError`.

Model rows (``models``) are named launch configurations; a session created from one keeps
``model_row_id`` and mirrors the row's adapter, model and permission mode (see
:meth:`Store.update_model_row` and :meth:`Store.delete_model_row`). Lock order when both are
locked: the model row first, then sessions.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self

from sqlalchemy import Engine, and_, delete, false as sa_false, func, or_, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.pool import StaticPool
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ApprovalError, ConflictError, InvalidRequestError, NotFoundError, StoreError
from octipusd.store.engine import WRITE_OPTION, display_url, make_engine
from octipusd.store.invocation_store import InvocationStoreMixin
from octipusd.store.journal_store import JournalStoreMixin
from octipusd.store.migrate import upgrade
from octipusd.store.models import (
    ApprovalRow,
    ModelRowRow,
    PermissionGrantRow,
    RunEventRow,
    RunRow,
    SessionCheckpointRow,
    SessionMessageRow,
    SessionRow,
    SpaceRow,
    ToolActionRow,
    ToolInvocationRow,
    VendorSessionRow,
    WorkPlanRow,
)
from octipusd.store.policy_store import PolicyStoreMixin
from octipusd.store.records import (
    Approval,
    ApprovalStatus,
    ModelRow,
    Run,
    RunEvent,
    RunStatus,
    Session,
    WorkPlan,
)
from octipusd.store.recovery_store import RecoveryStoreMixin
from octipusd.store.reuse_store import ReuseStoreMixin
from octipusd.store.validation import (
    check_additive_flags_shape,
    check_binary,
    check_metadata,
    check_model_name,
    check_model_row_name,
    check_permission_mode,
    check_session_options,
)

__all__ = ["APPROVAL_KINDS", "MODEL_ROW_UPDATABLE_FIELDS", "RUN_UPDATABLE_FIELDS", "SYSTEM_ACTOR", "Store"]

#: Kinds of approval: a yes/no tool approval, or a questionnaire that needs answers (seed 003).
APPROVAL_KINDS: tuple[str, ...] = ("tool", "questionnaire", "action_recovery", "pipeline_replay")

#: ``decided_by`` written when octipusd itself resolves an approval (expiry, cancel).
SYSTEM_ACTOR = "octipusd"

#: Run columns :meth:`Store.update_run` may change.
RUN_UPDATABLE_FIELDS: frozenset[str] = frozenset(
    {
        "status",
        "reason",
        "vendor_session_id",
        "resumed",
        "pid",
        "exit_code",
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "cost_usd",
        "usage_estimated",
        "result_text",
        "owner",
        "started_at",
        "ended_at",
        "resume_key",
    }
)

#: Model row fields :meth:`Store.update_model_row` may change.
MODEL_ROW_UPDATABLE_FIELDS: frozenset[str] = frozenset(
    {"name", "adapter", "binary", "model", "permission_mode", "additive_flags", "metadata"}
)

#: Model row fields a linked session mirrors (copied by create, update and delete).
_MIRRORED_FIELDS: tuple[str, ...] = ("adapter", "model", "permission_mode")

_TERMINAL_RUN_VALUES = tuple(s.value for s in RunStatus if s.terminal)
_LIVE_RUN_VALUES = tuple(s.value for s in RunStatus if not s.terminal)


def _new_id() -> str:
    return uuid.uuid4().hex


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime | None) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds") if moment is not None else "an unknown time"


def _dump(value: dict[str, Any], what: str) -> str:
    if not isinstance(value, dict):
        raise TypeError(f"{what} must be a dict (a JSON object), not {type(value).__name__}")
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} is not JSON-serialisable: {exc}") from exc


def _load(text: str) -> dict[str, Any]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {"value": value}


def _load_strings(text: str) -> tuple[str, ...]:
    value = json.loads(text)
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _session(row: SessionRow) -> Session:
    return Session(
        id=row.id,
        title=row.title,
        workspace=row.workspace,
        adapter=row.adapter,
        model=row.model,
        permission_mode=row.permission_mode,
        attended=row.attended,
        created_at=row.created_at,
        updated_at=row.updated_at,
        model_row_id=row.model_row_id,
        options=_load(row.options),
        flow_label=row.flow_label,
        space_id=row.space_id,
        clear_generation=row.clear_generation,
        cleared_at=row.cleared_at,
    )


def _model_row(row: ModelRowRow) -> ModelRow:
    return ModelRow(
        id=row.id,
        name=row.name,
        adapter=row.adapter,
        binary=row.binary,
        model=row.model,
        permission_mode=row.permission_mode,
        additive_flags=_load_strings(row.additive_flags),
        metadata=_load(row.meta),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _check_adapter_name(adapter: object) -> str:
    if not isinstance(adapter, str) or not adapter.strip():
        raise ValueError(f"adapter must be a non-empty adapter name, got {adapter!r}")
    return adapter


def _model_row_values(fields: dict[str, Any]) -> dict[str, Any]:
    """Check model row fields and return them as column values (JSON columns encoded)."""
    checks: dict[str, Callable[[Any], Any]] = {
        "name": check_model_row_name,
        "adapter": _check_adapter_name,
        "binary": check_binary,
        "model": check_model_name,
        "permission_mode": check_permission_mode,
    }
    values: dict[str, Any] = {}
    for key, value in fields.items():
        if key == "additive_flags":
            values[key] = json.dumps(list(check_additive_flags_shape(value)))
        elif key == "metadata":
            values["meta"] = _dump(check_metadata(value), "metadata")
        else:
            values[key] = checks[key](value)
    return values


def _run(row: RunRow) -> Run:
    return Run(
        id=row.id,
        session_id=row.session_id,
        turn_index=row.turn_index,
        status=RunStatus(row.status),
        prompt=row.prompt,
        reason=row.reason,
        vendor_session_id=row.vendor_session_id,
        resumed=row.resumed,
        pid=row.pid,
        exit_code=row.exit_code,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        cache_creation_input_tokens=row.cache_creation_input_tokens,
        cache_read_input_tokens=row.cache_read_input_tokens,
        cost_usd=row.cost_usd,
        usage_estimated=row.usage_estimated,
        result_text=row.result_text,
        owner=row.owner,
        created_at=row.created_at,
        started_at=row.started_at,
        ended_at=row.ended_at,
        plan_mode=row.plan_mode,
        author=row.author,
        parent_run_id=row.parent_run_id,
        role=row.role,
        resume_key=row.resume_key,
    )


def _event(row: RunEventRow) -> RunEvent:
    assert row.id is not None
    return RunEvent(
        id=row.id,
        run_id=row.run_id,
        seq=row.seq,
        kind=row.kind,
        data=_load(row.data),
        created_at=row.created_at,
    )


def _approval(row: ApprovalRow) -> Approval:
    return Approval(
        id=row.id,
        run_id=row.run_id,
        session_id=row.session_id,
        tool_id=row.tool_id,
        subject=row.subject,
        reason=row.reason,
        input=_load(row.input),
        explanation=row.explanation,
        vendor_request_id=row.vendor_request_id,
        status=ApprovalStatus(row.status),
        decided_by=row.decided_by,
        decision_reason=row.decision_reason,
        created_at=row.created_at,
        expires_at=row.expires_at,
        decided_at=row.decided_at,
        kind=row.kind,
        questions=_load(row.questions) if row.questions else None,
        answers=_load(row.answers) if row.answers else None,
        grant_id=row.grant_id,
        action_ids=tuple(json.loads(row.action_ids)) if row.action_ids else (),
    )


def _work_plan(row: WorkPlanRow) -> WorkPlan:
    return WorkPlan(session_id=row.session_id, plan=_load(row.plan), updated_at=row.updated_at)


def _check_limit(limit: int) -> None:
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")


class Store(PolicyStoreMixin, JournalStoreMixin, RecoveryStoreMixin, InvocationStoreMixin, ReuseStoreMixin):
    """Synchronous, thread-safe access to sessions, runs, events, approvals and plans.

    Policy and spaces come from :class:`~octipusd.store.policy_store.PolicyStoreMixin`, the
    action journal from :class:`~octipusd.store.journal_store.JournalStoreMixin`, the recovery of
    uncertain actions from :class:`~octipusd.store.recovery_store.RecoveryStoreMixin`, calls started
    by hand from :class:`~octipusd.store.invocation_store.InvocationStoreMixin`, and session
    reuse (vendor sessions, transcript, checkpoints, ``/clear``) from
    :class:`~octipusd.store.reuse_store.ReuseStoreMixin`.

    Build it with :meth:`open` (creates the engine and migrates), or from an engine whose
    schema is already migrated.

    Args:
        engine: An engine from :func:`~octipusd.store.engine.make_engine`. The store owns it
            and disposes of it in :meth:`close`.
        clock: Returns the current time as an aware UTC datetime; defaults to the system
            clock. Tests pass a fake one.
    """

    def __init__(self, engine: Engine, *, clock: Callable[[], datetime] | None = None) -> None:
        self._engine = engine
        self._clock = clock or _utcnow
        self._sqlite = engine.dialect.name == "sqlite"
        # An in-memory SQLite database is one connection shared by all threads: serialise
        # every transaction on it, not only writes.
        self._serialize_reads = self._sqlite and isinstance(engine.pool, StaticPool)
        self._write_lock = threading.Lock()
        self._closed = False

    def now(self) -> datetime:
        """The store's clock (aware UTC): the time its records are written with."""
        return self._clock()

    @classmethod
    def open(cls, url: str, *, clock: Callable[[], datetime] | None = None) -> Store:
        """Create the engine for ``url``, migrate the schema to the newest revision, return a store.

        Args:
            url: ``sqlite:///<path>`` or ``postgresql+psycopg://...``.
            clock: See the class docstring.

        Returns:
            An open store.

        Raises:
            StoreError: The URL is unsupported, or the database cannot be reached or migrated.
        """
        engine = make_engine(url)
        try:
            upgrade(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, clock=clock)

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
    def _tx(self, what: str, *, write: bool = False) -> Iterator[DbSession]:
        """One transaction: committed on normal exit (writes), rolled back on an exception."""
        if self._closed:
            raise StoreError(f"the store for {self.url_for_display} is closed (while {what})")
        serialize = (write and self._sqlite) or self._serialize_reads
        guard: AbstractContextManager[Any] = self._write_lock if serialize else nullcontext()
        try:
            with guard, DbSession(self._engine, expire_on_commit=False, autoflush=False) as db:
                if write:
                    db.connection(execution_options={WRITE_OPTION: True})
                yield db
                if write:
                    db.commit()
        except SQLAlchemyError as exc:
            detail = getattr(exc, "orig", None) or exc
            raise StoreError(
                f"database error while {what} in {self.url_for_display}: {type(detail).__name__}: {detail}"
            ) from exc

    @staticmethod
    def _lock_session(db: DbSession, session_id: str) -> SessionRow:
        row = db.exec(
            select(SessionRow).where(col(SessionRow.id) == session_id).with_for_update(key_share=True)
        ).first()
        if row is None:
            raise NotFoundError(f"session {session_id} not found")
        return row

    @staticmethod
    def _session_record(row: SessionRow) -> Session:
        return _session(row)

    @staticmethod
    def _lock_run(db: DbSession, run_id: str) -> RunRow:
        row = db.exec(select(RunRow).where(col(RunRow.id) == run_id).with_for_update(key_share=True)).first()
        if row is None:
            raise NotFoundError(f"run {run_id} not found")
        return row

    @staticmethod
    def _get_run_row(db: DbSession, run_id: str) -> RunRow:
        row = db.get(RunRow, run_id)
        if row is None:
            raise NotFoundError(f"run {run_id} not found")
        return row

    @staticmethod
    def _get_approval_row(db: DbSession, approval_id: str) -> ApprovalRow:
        row = db.get(ApprovalRow, approval_id)
        if row is None:
            raise NotFoundError(f"approval {approval_id} not found")
        return row

    # Sessions ----------------------------------------------------------------------------

    def create_session(
        self,
        *,
        workspace: str,
        adapter: str,
        title: str | None = None,
        model: str | None = None,
        permission_mode: str = "workspace",
        attended: bool = True,
        model_row_id: str | None = None,
        options: dict[str, Any] | None = None,
        space_id: str | None = None,
    ) -> Session:
        """Create a session.

        A session created from a model row (``model_row_id``) must carry that row's adapter,
        model and permission mode (pass the row's values); the row is read under a share lock
        in the same transaction, so a concurrent :meth:`update_model_row` or
        :meth:`delete_model_row` either happens entirely before or entirely after.

        Args:
            workspace: Absolute path of the working folder (not checked for existence).
            adapter: Adapter name, e.g. ``"claude-code"``.
            title: Optional human title.
            model: Vendor model name, or None for the adapter's default.
            permission_mode: Permission mode name.
            attended: False when no person can answer approvals.
            model_row_id: Id of the model row the session is created from, or None.
            options: Per-session adapter options (JSON object; the known ``cliAgent`` keys
                ``transport`` str, ``inheritApiKeys`` bool, ``sharedUse`` bool are
                type-checked; ``passEnv`` is refused: it belongs to the model row); None for ``{}``.
            space_id: The shared space the session belongs to (must exist and not be
                archived), or None for a personal session.

        Returns:
            The new session (id: 32 hex characters).

        Raises:
            ValueError: ``workspace`` is not an absolute path, ``adapter`` is empty, or
                ``options`` sets ``passEnv``.
            TypeError: ``options`` is not a JSON-serialisable object, or a known key has the
                wrong type.
            NotFoundError: No model row ``model_row_id``, or no space ``space_id``.
            ConflictError: ``adapter``, ``model`` or ``permission_mode`` differ from the row's
                (the message lists the row's values), or the space is archived.
            StoreError: The database failed.
        """
        if not workspace.startswith("/"):
            raise ValueError(f"workspace must be an absolute path, got {workspace!r}")
        if not adapter:
            raise ValueError("adapter must not be empty")
        options_text = _dump(check_session_options({} if options is None else options), "options")
        now = self._clock()
        row = SessionRow(
            id=_new_id(),
            title=title,
            workspace=workspace,
            adapter=adapter,
            model=model,
            permission_mode=permission_mode,
            attended=attended,
            created_at=now,
            updated_at=now,
            model_row_id=model_row_id,
            options=options_text,
            space_id=space_id,
        )
        with self._tx("creating a session", write=True) as db:
            if space_id is not None:
                space = db.exec(
                    select(SpaceRow).where(col(SpaceRow.id) == space_id).with_for_update(read=True)
                ).first()
                if space is None:
                    raise NotFoundError(f"space {space_id} not found")
                if space.archived_at is not None:
                    raise ConflictError(f"space {space.name!r} is archived; it takes no new sessions")
            if model_row_id is not None:
                source = db.exec(
                    select(ModelRowRow).where(col(ModelRowRow.id) == model_row_id).with_for_update(read=True)
                ).first()
                if source is None:
                    raise NotFoundError(f"model row {model_row_id} not found")
                differing = [f for f in _MIRRORED_FIELDS if getattr(source, f) != getattr(row, f)]
                if differing:
                    wanted = ", ".join(f"{f}={getattr(source, f)!r}" for f in _MIRRORED_FIELDS)
                    raise ConflictError(
                        f"a session created from model row {source.name!r} takes the row's values ({wanted}); "
                        f"the request differs in {', '.join(differing)}"
                    )
            db.add(row)
        return _session(row)

    def get_session(self, session_id: str) -> Session:
        """Return the session ``session_id``.

        Raises:
            NotFoundError: No such session.
            StoreError: The database failed.
        """
        with self._tx(f"reading session {session_id}") as db:
            row = db.get(SessionRow, session_id)
            if row is None:
                raise NotFoundError(f"session {session_id} not found")
            return _session(row)

    def list_sessions(self, limit: int = 100) -> list[Session]:
        """Return up to ``limit`` sessions, newest (by creation) first.

        Raises:
            ValueError: ``limit`` < 1.
            StoreError: The database failed.
        """
        _check_limit(limit)
        with self._tx("listing sessions") as db:
            rows = db.exec(
                select(SessionRow)
                .order_by(col(SessionRow.created_at).desc(), col(SessionRow.id).desc())
                .limit(limit)
            ).all()
            return [_session(r) for r in rows]

    def touch_session(self, session_id: str) -> Session:
        """Set the session's ``updated_at`` to now and return it.

        Raises:
            NotFoundError: No such session.
            StoreError: The database failed.
        """
        with self._tx(f"touching session {session_id}", write=True) as db:
            row = self._lock_session(db, session_id)
            row.updated_at = self._clock()
            db.add(row)
        return _session(row)

    def delete_session(self, session_id: str) -> None:
        """Delete a session and everything recorded under it, in one transaction.

        Removes its runs and their events, approvals, vendor session ids, transcript messages
        and checkpoints, work plan, session-scoped grants, hand-started invocations and its
        action journal with the receipts (seed 000: session deletion removes the associated
        journal records).

        Raises:
            NotFoundError: No such session.
            ConflictError: One of its runs has not ended (stop it first).
            StoreError: The database failed.
        """
        with self._tx(f"deleting session {session_id}", write=True) as db:
            session = db.exec(
                select(SessionRow).where(col(SessionRow.id) == session_id).with_for_update()
            ).first()
            if session is None:
                raise NotFoundError(f"session {session_id} not found")
            runs = db.exec(select(RunRow).where(col(RunRow.session_id) == session_id)).all()
            live = [r.id for r in runs if not RunStatus(r.status).terminal]
            if live:
                raise ConflictError(
                    f"session {session_id} has a run that has not ended ({', '.join(live)}); "
                    "stop it with `octipusctl runs stop RUN_ID`, then delete the session"
                )
            run_ids = [r.id for r in runs]
            action_ids = list(
                db.exec(
                    select(ToolActionRow.id).where(
                        or_(
                            col(ToolActionRow.session_id) == session_id,
                            col(ToolActionRow.run_id).in_(run_ids) if run_ids else sa_false(),
                        )
                    )
                ).all()
            )
            self._delete_actions(db, action_ids)
            db.exec(delete(ToolInvocationRow).where(col(ToolInvocationRow.session_id) == session_id))
            db.exec(delete(ApprovalRow).where(col(ApprovalRow.session_id) == session_id))
            if run_ids:
                db.exec(delete(RunEventRow).where(col(RunEventRow.run_id).in_(run_ids)))
            db.exec(delete(VendorSessionRow).where(col(VendorSessionRow.session_id) == session_id))
            db.exec(delete(SessionCheckpointRow).where(col(SessionCheckpointRow.session_id) == session_id))
            db.exec(delete(SessionMessageRow).where(col(SessionMessageRow.session_id) == session_id))
            db.exec(delete(WorkPlanRow).where(col(WorkPlanRow.session_id) == session_id))
            db.exec(delete(PermissionGrantRow).where(col(PermissionGrantRow.session_id) == session_id))
            db.exec(delete(RunRow).where(col(RunRow.session_id) == session_id))
            db.delete(session)

    # Model rows --------------------------------------------------------------------------

    @staticmethod
    def _find_model_row(db: DbSession, id_or_name: str, lock: str | None = None) -> ModelRowRow:
        """Return the row whose id (first) or name is ``id_or_name``.

        ``lock``: None (no lock), ``"no_key_update"`` (FOR NO KEY UPDATE: an update) or
        ``"update"`` (FOR UPDATE: a delete).
        """
        for column in (col(ModelRowRow.id), col(ModelRowRow.name)):
            query = select(ModelRowRow).where(column == id_or_name)
            if lock == "no_key_update":
                query = query.with_for_update(key_share=True)
            elif lock == "update":
                query = query.with_for_update()
            row = db.exec(query).first()
            if row is not None:
                return row
        raise NotFoundError(f"model row {id_or_name!r} not found (no row has that id or name)")

    @staticmethod
    def _flush_unique_name(db: DbSession, name: str) -> None:
        try:
            db.flush()
        except IntegrityError as exc:  # a concurrent writer took the name between check and insert
            raise ConflictError(f"a model row named {name!r} already exists; choose another name") from exc

    @staticmethod
    def _check_name_free(db: DbSession, name: str, own_id: str | None = None) -> None:
        taken = db.exec(select(ModelRowRow.id).where(col(ModelRowRow.name) == name)).first()
        if taken is not None and taken != own_id:
            raise ConflictError(f"a model row named {name!r} already exists; choose another name")

    def create_model_row(
        self,
        *,
        name: str,
        adapter: str,
        binary: str | None = None,
        model: str | None = None,
        permission_mode: str = "workspace",
        additive_flags: Iterable[str] = (),
        metadata: dict[str, Any] | None = None,
    ) -> ModelRow:
        """Create a model row.

        The store checks the shape of every field (see :mod:`octipusd.store.validation`), not
        whether the adapter is installed or accepts the flags: callers check those against
        the adapter first and pass the adapter's normalized flags.

        Args:
            name: Unique name: 1-100 ASCII letters, digits, ``.``, ``_``, ``-``; not 32 hex
                characters.
            adapter: Adapter registry name, e.g. ``"claude-code"``.
            binary: A command name or an absolute path overriding the adapter's ``cliModels``
                binary, or None.
            model: Vendor model name, or None for the vendor's default.
            permission_mode: ``workspace`` (default), ``full``, ``plan`` or ``default``.
            additive_flags: Extra vendor flags (strings), stored as given.
            metadata: JSON object (``{"cliAgent": {...}}``); None for ``{}``.

        Returns:
            The new row (id: 32 hex characters).

        Raises:
            ValueError: A field has a bad value (the message names it and what is accepted).
            TypeError: A field has the wrong type (e.g. ``metadata.cliAgent`` not an object,
                ``metadata.cliAgent.sharedUse`` not a boolean, flags not a list of strings).
            ConflictError: A row with that name exists (the message names it).
            StoreError: The database failed.
        """
        values = _model_row_values(
            {
                "name": name,
                "adapter": adapter,
                "binary": binary,
                "model": model,
                "permission_mode": permission_mode,
                "additive_flags": tuple(additive_flags)
                if not isinstance(additive_flags, str)
                else additive_flags,
                "metadata": {} if metadata is None else metadata,
            }
        )
        now = self._clock()
        row = ModelRowRow(id=_new_id(), created_at=now, updated_at=now, **values)
        with self._tx(f"creating model row {name!r}", write=True) as db:
            self._check_name_free(db, name)
            db.add(row)
            self._flush_unique_name(db, name)
        return _model_row(row)

    def get_model_row(self, id_or_name: str) -> ModelRow:
        """Return the model row with id ``id_or_name``, or else with that name.

        Raises:
            NotFoundError: No row has that id or name.
            StoreError: The database failed.
        """
        with self._tx(f"reading model row {id_or_name!r}") as db:
            return _model_row(self._find_model_row(db, id_or_name))

    def list_model_rows(self) -> list[ModelRow]:
        """Return every model row, by name.

        Raises:
            StoreError: The database failed.
        """
        with self._tx("listing model rows") as db:
            rows = db.exec(select(ModelRowRow).order_by(col(ModelRowRow.name))).all()
            return [_model_row(r) for r in rows]

    def update_model_row(self, id_or_name: str, **fields: Any) -> ModelRow:
        """Change some fields of a model row; linked sessions follow.

        Each given field replaces the stored value whole (``metadata`` is not merged; pass
        ``binary=None`` / ``model=None`` to clear them). In the same transaction every session
        whose ``model_row_id`` is this row gets the row's new ``adapter``, ``model`` and
        ``permission_mode`` (and ``updated_at`` = now when one of them changed). With no fields,
        nothing changes.

        Args:
            id_or_name: The row's id or name.
            **fields: New values; names from :data:`MODEL_ROW_UPDATABLE_FIELDS` (``name``,
                ``adapter``, ``binary``, ``model``, ``permission_mode``, ``additive_flags``,
                ``metadata``), checked as in :meth:`create_model_row`.

        Returns:
            The row after the change.

        Raises:
            ValueError: An unknown field, or a bad value.
            TypeError: A value of the wrong type.
            NotFoundError: No row has that id or name.
            ConflictError: ``name`` is taken by another row.
            StoreError: The database failed.
        """
        unknown = sorted(set(fields) - MODEL_ROW_UPDATABLE_FIELDS)
        if unknown:
            raise ValueError(
                f"update_model_row cannot set {', '.join(unknown)}; "
                f"updatable fields: {', '.join(sorted(MODEL_ROW_UPDATABLE_FIELDS))}"
            )
        values = _model_row_values(fields)
        with self._tx(f"updating model row {id_or_name!r}", write=True) as db:
            row = self._find_model_row(db, id_or_name, lock="no_key_update")
            if not values:
                return _model_row(row)
            if "name" in values:
                self._check_name_free(db, values["name"], own_id=row.id)
            before = {f: getattr(row, f) for f in _MIRRORED_FIELDS}
            for key, value in values.items():
                setattr(row, key, value)
            now = self._clock()
            row.updated_at = now
            db.add(row)
            self._flush_unique_name(db, row.name)
            after = {f: getattr(row, f) for f in _MIRRORED_FIELDS}
            if after != before:
                db.exec(
                    update(SessionRow)
                    .where(col(SessionRow.model_row_id) == row.id)
                    .values(**after, updated_at=now)
                    .execution_options(synchronize_session=False)
                )
            return _model_row(row)

    def delete_model_row(self, id_or_name: str) -> None:
        """Delete a model row; the sessions created from it keep working.

        In one transaction (the row locked first): every session whose ``model_row_id`` is this
        row gets the row's ``adapter``, ``model`` and ``permission_mode`` copied onto it (they
        already mirror them), the row's ``metadata.cliAgent`` folded into its ``options``
        (``{**row cliAgent, **session options}``: what the runtime's merge gave before), its
        ``updated_at`` = now and ``model_row_id`` = NULL; then the row is deleted. The row's
        ``binary`` and ``additive_flags`` are not kept: those sessions then run the adapter's
        configured binary without additive flags.

        Args:
            id_or_name: The row's id or name.

        Raises:
            NotFoundError: No row has that id or name.
            StoreError: The database failed.
        """
        with self._tx(f"deleting model row {id_or_name!r}", write=True) as db:
            row = self._find_model_row(db, id_or_name, lock="update")
            cli_agent = _model_row(row).cli_agent
            sessions = db.exec(
                select(SessionRow)
                .where(col(SessionRow.model_row_id) == row.id)
                .order_by(col(SessionRow.id))
                .with_for_update(key_share=True)
            ).all()
            now = self._clock()
            for session in sessions:
                session.adapter = row.adapter
                session.model = row.model
                session.permission_mode = row.permission_mode
                if cli_agent:
                    session.options = _dump({**cli_agent, **_load(session.options)}, "options")
                session.model_row_id = None
                session.updated_at = now
                db.add(session)
            db.flush()
            db.exec(
                delete(ModelRowRow)
                .where(col(ModelRowRow.id) == row.id)
                .execution_options(synchronize_session=False)
            )

    # Runs --------------------------------------------------------------------------------

    def create_run(
        self,
        *,
        session_id: str,
        prompt: str,
        owner: str,
        plan_mode: bool = False,
        author: str | None = None,
        parent_run_id: str | None = None,
        role: str | None = None,
        resume_key: str | None = None,
    ) -> Run:
        """Queue a new run (turn) in a session, or a child agent's run.

        The turn index is the session's previous highest plus one (1 for the first run);
        concurrent callers always get distinct, gap-free indexes. A child run takes the next
        index too. The session's ``updated_at`` is set to now.

        Args:
            session_id: The session.
            prompt: The turn's prompt text.
            owner: Instance id of the daemon that will run it.
            plan_mode: Run this turn in plan mode (overrides the row's permission mode).
            author: Who posted the turn (None: the daemon's user).
            parent_run_id: For a child agent's run, the run that spawned it (a run of the same
                session); None for a root turn.
            role: For a child agent's run, its role name.
            resume_key: For a child agent's run, the resume key it was spawned with.

        Returns:
            The new run, status ``queued``.

        Raises:
            NotFoundError: No such session, or no run ``parent_run_id``.
            InvalidRequestError: ``parent_run_id`` is a run of another session.
            StoreError: The database failed.
        """
        with self._tx(f"creating a run in session {session_id}", write=True) as db:
            session_row = self._lock_session(db, session_id)
            if parent_run_id is not None:
                parent = db.get(RunRow, parent_run_id)
                if parent is None:
                    raise NotFoundError(f"parent run {parent_run_id} not found")
                if parent.session_id != session_id:
                    raise InvalidRequestError(
                        f"parent run {parent_run_id} belongs to session {parent.session_id}, not {session_id}"
                    )
            highest = db.exec(
                select(func.max(RunRow.turn_index)).where(col(RunRow.session_id) == session_id)
            ).one()
            now = self._clock()
            row = RunRow(
                id=_new_id(),
                session_id=session_id,
                turn_index=(highest or 0) + 1,
                status=RunStatus.QUEUED.value,
                prompt=prompt,
                owner=owner,
                created_at=now,
                plan_mode=plan_mode,
                author=author,
                parent_run_id=parent_run_id,
                role=role,
                resume_key=resume_key,
            )
            session_row.updated_at = now
            db.add(session_row)
            db.add(row)
        return _run(row)

    def get_run(self, run_id: str) -> Run:
        """Return the run ``run_id``.

        Raises:
            NotFoundError: No such run.
            StoreError: The database failed.
        """
        with self._tx(f"reading run {run_id}") as db:
            return _run(self._get_run_row(db, run_id))

    def list_runs(
        self,
        *,
        session_id: str | None = None,
        statuses: Iterable[RunStatus | str] | None = None,
        limit: int = 100,
    ) -> list[Run]:
        """Return up to ``limit`` runs, newest first.

        Args:
            session_id: Only runs of this session (an unknown id gives an empty list).
            statuses: Only runs in one of these statuses.
            limit: Maximum number of runs.

        Raises:
            ValueError: An unknown status, or ``limit`` < 1.
            StoreError: The database failed.
        """
        _check_limit(limit)
        query = select(RunRow)
        if session_id is not None:
            query = query.where(col(RunRow.session_id) == session_id)
        if statuses is not None:
            query = query.where(col(RunRow.status).in_([RunStatus(s).value for s in statuses]))
        query = query.order_by(col(RunRow.created_at).desc(), col(RunRow.turn_index).desc()).limit(limit)
        with self._tx("listing runs") as db:
            return [_run(r) for r in db.exec(query).all()]

    def update_run(self, run_id: str, **fields: Any) -> Run:
        """Change some columns of a run.

        Args:
            run_id: The run.
            **fields: Column values; names from :data:`RUN_UPDATABLE_FIELDS`. ``status`` may
                only be a non-terminal status (use :meth:`finish_run` to end a run) and only
                changes a run that is not terminal yet.

        Returns:
            The run after the change.

        Raises:
            ValueError: An unknown or read-only field, an invalid status, or a terminal status.
            NotFoundError: No such run.
            ConflictError: ``status`` given but the run already ended.
            StoreError: The database failed.
        """
        unknown = sorted(set(fields) - RUN_UPDATABLE_FIELDS)
        if unknown:
            raise ValueError(
                f"update_run cannot set {', '.join(unknown)}; "
                f"updatable fields: {', '.join(sorted(RUN_UPDATABLE_FIELDS))}"
            )
        values = dict(fields)
        if "status" in values:
            status = RunStatus(values["status"])
            if status.terminal:
                raise ValueError(f"use finish_run to set the terminal status {status.value!r}")
            values["status"] = status.value
        with self._tx(f"updating run {run_id}", write=True) as db:
            if values:
                statement = update(RunRow).where(col(RunRow.id) == run_id)
                if "status" in values:
                    statement = statement.where(col(RunRow.status).not_in(_TERMINAL_RUN_VALUES))
                result = db.exec(statement.values(**values).execution_options(synchronize_session=False))
                if result.rowcount == 0:
                    row = self._get_run_row(db, run_id)
                    raise ConflictError(
                        f"run {run_id} already ended ({row.status}); "
                        f"its status cannot become {values.get('status')}"
                    )
            row = self._get_run_row(db, run_id)
            return _run(row)

    def finish_run(
        self,
        run_id: str,
        *,
        status: RunStatus | str,
        reason: str | None = None,
        exit_code: int | None = None,
        result_text: str | None = None,
    ) -> Run:
        """End a run with a terminal status; the first terminal status wins.

        Sets ``ended_at`` to now, and cancels the run's pending approvals in the same
        transaction. If the run is already terminal nothing changes and it is returned as
        it is. ``reason``, ``exit_code`` and ``result_text`` are written only when given.

        Args:
            run_id: The run.
            status: ``succeeded``, ``failed``, ``interrupted`` or ``cancelled``.
            reason: Why it failed / was interrupted / cancelled.
            exit_code: Exit code of the vendor CLI.
            result_text: Final answer text.

        Returns:
            The run after the call (unchanged when it had already ended).

        Raises:
            ValueError: ``status`` is not a terminal status.
            NotFoundError: No such run.
            StoreError: The database failed.
        """
        final = RunStatus(status)
        if not final.terminal:
            raise ValueError(f"finish_run needs a terminal status, got {final.value!r}")
        values: dict[str, Any] = {"status": final.value, "ended_at": self._clock()}
        if reason is not None:
            values["reason"] = reason
        if exit_code is not None:
            values["exit_code"] = exit_code
        if result_text is not None:
            values["result_text"] = result_text
        with self._tx(f"finishing run {run_id}", write=True) as db:
            result = db.exec(
                update(RunRow)
                .where(col(RunRow.id) == run_id, col(RunRow.status).not_in(_TERMINAL_RUN_VALUES))
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount:
                self._resolve_pending_for_runs(
                    db, [run_id], ApprovalStatus.CANCELLED, f"run {final.value}", values["ended_at"]
                )
            return _run(self._get_run_row(db, run_id))

    def interrupt_orphaned_runs(self, *, live_owner: str, reason: str) -> list[Run]:
        """Mark every unfinished run not owned by ``live_owner`` as interrupted.

        Used at daemon start: runs left by a previous (dead) daemon instance become
        ``interrupted`` with ``reason`` and ``ended_at`` = now, and their pending approvals
        become ``cancelled`` — all in one transaction.

        Args:
            live_owner: Instance id of the running daemon; its runs are left alone.
            reason: Stored as the runs' ``reason`` and the approvals' ``decision_reason``.

        Returns:
            The interrupted runs, oldest first.

        Raises:
            StoreError: The database failed.
        """
        with self._tx("interrupting orphaned runs", write=True) as db:
            rows = db.exec(
                select(RunRow)
                .where(col(RunRow.status).in_(_LIVE_RUN_VALUES), col(RunRow.owner) != live_owner)
                .order_by(col(RunRow.created_at), col(RunRow.id))
                .with_for_update()
            ).all()
            now = self._clock()
            for row in rows:
                row.status = RunStatus.INTERRUPTED.value
                row.reason = reason
                row.ended_at = now
                db.add(row)
            db.flush()
            self._resolve_pending_for_runs(db, [r.id for r in rows], ApprovalStatus.CANCELLED, reason, now)
            return [_run(r) for r in rows]

    # Events ------------------------------------------------------------------------------

    def append_event(self, run_id: str, kind: str, data: dict[str, Any]) -> RunEvent:
        """Append an event to a run's log; durable when this returns.

        Args:
            run_id: The run.
            kind: Event kind, e.g. ``"text"``.
            data: JSON object payload.

        Returns:
            The stored event; ``seq`` is the run's previous highest plus one (1 first),
            distinct and gap-free under concurrent callers.

        Raises:
            TypeError: ``data`` is not a JSON-serialisable dict.
            NotFoundError: No such run.
            StoreError: The database failed.
        """
        payload = _dump(data, "event data")
        with self._tx(f"appending an event to run {run_id}", write=True) as db:
            self._lock_run(db, run_id)
            highest = db.exec(
                select(func.max(RunEventRow.seq)).where(col(RunEventRow.run_id) == run_id)
            ).one()
            row = RunEventRow(
                run_id=run_id, seq=(highest or 0) + 1, kind=kind, data=payload, created_at=self._clock()
            )
            db.add(row)
            db.flush()
        return _event(row)

    def list_events(self, run_id: str, *, after_seq: int = 0, limit: int = 1000) -> list[RunEvent]:
        """Return up to ``limit`` events of a run with ``seq > after_seq``, in ``seq`` order.

        Raises:
            ValueError: ``limit`` < 1.
            NotFoundError: No such run.
            StoreError: The database failed.
        """
        _check_limit(limit)
        with self._tx(f"listing events of run {run_id}") as db:
            rows = db.exec(
                select(RunEventRow)
                .where(col(RunEventRow.run_id) == run_id, col(RunEventRow.seq) > after_seq)
                .order_by(col(RunEventRow.seq))
                .limit(limit)
            ).all()
            if not rows:
                self._get_run_row(db, run_id)
            return [_event(r) for r in rows]

    # Approvals ---------------------------------------------------------------------------

    def create_approval(
        self,
        *,
        run_id: str | None,
        session_id: str,
        tool_id: str,
        subject: str | None,
        reason: str | None,
        input: dict[str, Any],
        explanation: str | None,
        vendor_request_id: str | None,
        expires_at: datetime | None,
        kind: str = "tool",
        questions: dict[str, Any] | None = None,
        action_ids: Iterable[str] = (),
    ) -> Approval:
        """Record a pending approval request for a run (or for a session, without a run).

        Args:
            run_id: The run asking; it must not have ended. None for a request that belongs
                to no run (a call started by hand, a pipeline replay review).
            session_id: The run's session.
            tool_id: Tool identifier, e.g. ``"cli-native:Bash"``.
            subject: The command or path concerned.
            reason: Why approval is needed.
            input: The tool call's input (JSON object).
            explanation: Which permission rule matched.
            vendor_request_id: The vendor's id for the request.
            expires_at: Aware datetime after which it can no longer be approved, or None.
            kind: ``tool``, ``questionnaire``, ``action_recovery`` or ``pipeline_replay``.
            questions: The questionnaire shown to people (JSON object), for ``questionnaire``.
            action_ids: The journal records a recovery or replay review covers.

        Returns:
            The new approval, status ``pending`` (id: 32 hex characters).

        Raises:
            TypeError: ``input`` is not a JSON-serialisable dict.
            ValueError: The run belongs to another session.
            NotFoundError: No such run (or session).
            ConflictError: The run already ended.
            StoreError: The database failed.
        """
        payload = _dump(input, "approval input")
        covered = list(action_ids)
        if kind not in APPROVAL_KINDS:
            raise ValueError(f"approval kind must be one of {', '.join(APPROVAL_KINDS)}, got {kind!r}")
        questions_text = _dump(questions, "approval questions") if questions is not None else None
        with self._tx(f"creating an approval for run {run_id or '(none)'}", write=True) as db:
            if run_id is None:
                self._lock_session(db, session_id)
            else:
                run = self._lock_run(db, run_id)
                if run.session_id != session_id:
                    raise ValueError(f"run {run_id} belongs to session {run.session_id}, not {session_id}")
                if RunStatus(run.status).terminal:
                    raise ConflictError(
                        f"run {run_id} already ended ({run.status}); it cannot ask for approval"
                    )
            row = ApprovalRow(
                id=_new_id(),
                run_id=run_id,
                session_id=session_id,
                tool_id=tool_id,
                subject=subject,
                reason=reason,
                input=payload,
                explanation=explanation,
                vendor_request_id=vendor_request_id,
                status=ApprovalStatus.PENDING.value,
                created_at=self._clock(),
                expires_at=expires_at,
                kind=kind,
                questions=questions_text,
                action_ids=json.dumps(covered) if covered else None,
            )
            db.add(row)
        return _approval(row)

    def get_approval(self, approval_id: str) -> Approval:
        """Return the approval ``approval_id``.

        Raises:
            NotFoundError: No such approval.
            StoreError: The database failed.
        """
        with self._tx(f"reading approval {approval_id}") as db:
            return _approval(self._get_approval_row(db, approval_id))

    def list_approvals(
        self,
        *,
        status: ApprovalStatus | str | None = None,
        run_id: str | None = None,
        limit: int = 200,
    ) -> list[Approval]:
        """Return up to ``limit`` approvals, newest first, optionally filtered.

        Raises:
            ValueError: An unknown status, or ``limit`` < 1.
            StoreError: The database failed.
        """
        _check_limit(limit)
        query = select(ApprovalRow)
        if status is not None:
            query = query.where(col(ApprovalRow.status) == ApprovalStatus(status).value)
        if run_id is not None:
            query = query.where(col(ApprovalRow.run_id) == run_id)
        query = query.order_by(col(ApprovalRow.created_at).desc(), col(ApprovalRow.id).desc()).limit(limit)
        with self._tx("listing approvals") as db:
            return [_approval(r) for r in db.exec(query).all()]

    def decide_approval(
        self,
        approval_id: str,
        *,
        approve: bool,
        decided_by: str,
        reason: str | None = None,
        answers: dict[str, Any] | None = None,
        grant: dict[str, Any] | None = None,
    ) -> Approval:
        """Approve or deny a pending approval, exactly once.

        One conditional ``UPDATE ... WHERE id = ? AND status = 'pending'`` (and not past
        ``expires_at``): of two concurrent deciders exactly one wins. A pending approval
        found past its deadline is marked ``expired`` (committed) and the call fails.

        Args:
            approval_id: The approval.
            approve: True to approve, False to deny.
            decided_by: Who decides (user name).
            reason: Optional reason stored as ``decision_reason``.
            answers: A questionnaire's answers (question text -> answer), stored with it.
            grant: Keyword arguments of :meth:`create_grant` (without ``created_by`` and
                ``approval_id``) for a scoped grant the answer creates ("remember"); written in
                the same transaction, and only when this call wins.

        Returns:
            The decided approval.

        Raises:
            NotFoundError: No such approval.
            ApprovalError: It was already decided, expired or cancelled; the message says
                what, by whom and when.
            StoreError: The database failed.
        """
        status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
        now = self._clock()
        answers_text = _dump(answers, "approval answers") if answers is not None else None
        grant_row = (
            self._grant_row(**grant, created_by=decided_by, approval_id=approval_id)
            if grant is not None
            else None
        )
        values: dict[str, Any] = {
            "status": status.value,
            "decided_by": decided_by,
            "decision_reason": reason,
            "decided_at": now,
            "answers": answers_text,
        }
        if grant_row is not None:
            values["grant_id"] = grant_row.id
        with self._tx(f"deciding approval {approval_id}", write=True) as db:
            result = db.exec(
                update(ApprovalRow)
                .where(
                    col(ApprovalRow.id) == approval_id,
                    col(ApprovalRow.status) == ApprovalStatus.PENDING.value,
                    or_(col(ApprovalRow.expires_at).is_(None), col(ApprovalRow.expires_at) > now),
                )
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            won = bool(result.rowcount)
            if won and grant_row is not None:
                db.add(grant_row)
            if won:
                decided = self._get_approval_row(db, approval_id)
                if decided.kind == "action_recovery" and decided.action_ids:
                    covered = json.loads(decided.action_ids)
                    if approve:
                        self._acknowledge_actions(db, approval_id, covered, decided_by, now)
                    else:  # the refusal joins the evidence; the records stay unresolved
                        self._note_refused_review(db, approval_id, covered, decided_by, reason, now)
                self._follow_approval(db, approval_id, status.value, reason)
            if not won:
                # Still pending means it is past its deadline: record that it expired.
                db.exec(
                    update(ApprovalRow)
                    .where(
                        col(ApprovalRow.id) == approval_id,
                        col(ApprovalRow.status) == ApprovalStatus.PENDING.value,
                    )
                    .values(
                        status=ApprovalStatus.EXPIRED.value,
                        decided_by=SYSTEM_ACTOR,
                        decision_reason="expired before it was answered",
                        decided_at=now,
                    )
                    .execution_options(synchronize_session=False)
                )
                self._follow_approval(db, approval_id, "expired", "expired before it was answered")
            row = self._get_approval_row(db, approval_id)
        approval = _approval(row)
        if won:
            return approval
        raise ApprovalError(
            f"approval {approval_id} was already {approval.status.value} by "
            f"{approval.decided_by or SYSTEM_ACTOR} at {_iso(approval.decided_at)}"
            + (f" ({approval.decision_reason})" if approval.decision_reason else "")
        )

    def resolve_approval_if_pending(
        self,
        approval_id: str,
        *,
        status: ApprovalStatus | str,
        reason: str | None,
        decided_by: str = SYSTEM_ACTOR,
    ) -> bool:
        """Move an approval out of ``pending`` if (and only if) it still is (expiry, cancel).

        Args:
            approval_id: The approval.
            status: Any status but ``pending``; usually ``expired`` or ``cancelled``.
            reason: Stored as ``decision_reason``.
            decided_by: Stored as ``decided_by``; defaults to ``"octipusd"``.

        Returns:
            True if this call changed it, False if it had already left ``pending``.

        Raises:
            ValueError: ``status`` is ``pending`` or unknown.
            NotFoundError: No such approval.
            StoreError: The database failed.
        """
        target = ApprovalStatus(status)
        if target is ApprovalStatus.PENDING:
            raise ValueError("resolve_approval_if_pending needs a status other than 'pending'")
        with self._tx(f"resolving approval {approval_id}", write=True) as db:
            result = db.exec(
                update(ApprovalRow)
                .where(
                    col(ApprovalRow.id) == approval_id,
                    col(ApprovalRow.status) == ApprovalStatus.PENDING.value,
                )
                .values(
                    status=target.value,
                    decided_by=decided_by,
                    decision_reason=reason,
                    decided_at=self._clock(),
                )
                .execution_options(synchronize_session=False)
            )
            if result.rowcount:
                self._follow_approval(db, approval_id, target.value, reason)
                return True
            self._get_approval_row(db, approval_id)
            return False

    def cancel_pending_approvals(
        self,
        run_id: str,
        *,
        status: ApprovalStatus | str = ApprovalStatus.CANCELLED,
        reason: str | None,
    ) -> int:
        """Move every pending approval of a run to ``status`` (default ``cancelled``).

        Args:
            run_id: The run (an unknown run simply has none).
            status: Any status but ``pending``.
            reason: Stored as ``decision_reason``.

        Returns:
            How many approvals changed.

        Raises:
            ValueError: ``status`` is ``pending`` or unknown.
            StoreError: The database failed.
        """
        target = ApprovalStatus(status)
        if target is ApprovalStatus.PENDING:
            raise ValueError("cancel_pending_approvals needs a status other than 'pending'")
        with self._tx(f"cancelling approvals of run {run_id}", write=True) as db:
            return self._resolve_pending_for_runs(db, [run_id], target, reason, self._clock())

    @staticmethod
    def _resolve_pending_for_runs(
        db: DbSession, run_ids: list[str], status: ApprovalStatus, reason: str | None, now: datetime
    ) -> int:
        if not run_ids:
            return 0
        result = db.exec(
            update(ApprovalRow)
            .where(
                and_(
                    col(ApprovalRow.run_id).in_(run_ids),
                    col(ApprovalRow.status) == ApprovalStatus.PENDING.value,
                )
            )
            .values(status=status.value, decided_by=SYSTEM_ACTOR, decision_reason=reason, decided_at=now)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount)

    # Work plans --------------------------------------------------------------------------

    def get_work_plan(self, session_id: str) -> WorkPlan | None:
        """Return the session's work plan, or None when it has none.

        Raises:
            StoreError: The database failed.
        """
        with self._tx(f"reading the work plan of session {session_id}") as db:
            row = db.get(WorkPlanRow, session_id)
            return _work_plan(row) if row is not None else None

    def save_work_plan(self, session_id: str, plan: dict[str, Any]) -> WorkPlan:
        """Insert or replace the session's work plan.

        Args:
            session_id: The session.
            plan: The plan document (JSON object).

        Returns:
            The stored plan.

        Raises:
            TypeError: ``plan`` is not a JSON-serialisable dict.
            NotFoundError: No such session.
            StoreError: The database failed.
        """
        payload = _dump(plan, "work plan")
        with self._tx(f"saving the work plan of session {session_id}", write=True) as db:
            self._lock_session(db, session_id)
            row = db.get(WorkPlanRow, session_id)
            now = self._clock()
            if row is None:
                row = WorkPlanRow(session_id=session_id, plan=payload, updated_at=now)
            else:
                row.plan = payload
                row.updated_at = now
            db.add(row)
        return _work_plan(row)
