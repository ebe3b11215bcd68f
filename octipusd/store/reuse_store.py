"""Store methods for session reuse (seed 003 "Session reuse"; mixed into :class:`Store`).

Tables ``vendor_sessions`` (the vendor conversation ids a later run resumes), ``session_messages``
(the session's transcript, which a resumed launch sends from its cursor on) and
``session_checkpoints`` (published compaction summaries), plus ``sessions.clear_generation``.
Same conventions as ``repository.py``: one committed transaction per method, frozen records out.

Clear generations: ``/clear`` (:meth:`ReuseStoreMixin.clear_session`) increments the session's
``clear_generation`` and drops every vendor record of the session. Each vendor record, message
and checkpoint carries the generation it was written in. A writer that started before a clear
passes the generation it read (``generation=``); its write is refused (the method returns None
and writes nothing) once the session has moved on, so an old turn finishing after ``/clear``
stores nothing. The check and the write happen under the session row's lock (``SELECT ... FOR
NO KEY UPDATE`` on PostgreSQL, the write lock on SQLite), which also serialises message
sequence numbers, as :meth:`~octipusd.store.Store.create_run` does for turn indexes.

Keys: a root conversation is stored under its adapter name (``"claude-code"``); a child task's
under ``"<adapter>::<key>"``. Any key containing ``"::"`` is a child key. Child records are
pruned least recently used first beyond ``max_children`` (50) per session; compaction rotates
only the root keys its caller names.

Errors: a missing session raises :class:`~octipusd.errors.NotFoundError`; a refused argument
(unknown message role, checkpoint out of order, ...) :class:`~octipusd.errors.InvalidRequestError`;
a database failure :class:`~octipusd.errors.StoreError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from sqlalchemy import delete, func
from sqlmodel import Session as DbSession, col, select
from sqlmodel.sql.expression import SelectOfScalar

from octipusd.errors import InvalidRequestError
from octipusd.store.codec import StoreMixin
from octipusd.store.models import (
    SessionCheckpointRow,
    SessionMessageRow,
    SessionRow,
    VendorSessionRow,
)
from octipusd.store.records import MESSAGE_ROLES, Checkpoint, Session, SessionMessage, VendorSession

__all__ = [
    "CHILD_KEY_SEPARATOR",
    "MAX_CHILD_SESSIONS",
    "UNSET",
    "KeptTurn",
    "ReuseStoreMixin",
    "RootVendorSave",
    "is_child_key",
]

#: A vendor session key containing this is a child task key (``"<adapter>::<key>"``).
CHILD_KEY_SEPARATOR: Final = "::"
#: Child task records kept per session by default (seed 003: "At most 50").
MAX_CHILD_SESSIONS: Final = 50


class _Unset(Enum):
    """Type of :data:`UNSET`."""

    UNSET = "UNSET"


#: "Not given" for :meth:`ReuseStoreMixin.save_vendor_session`'s ``expect_vendor_session_id``
#: (where None already means "there must be no record").
UNSET: Final = _Unset.UNSET


def _vendor_session(row: VendorSessionRow) -> VendorSession:
    assert row.id is not None
    return VendorSession(
        id=row.id,
        session_id=row.session_id,
        key=row.key,
        vendor_session_id=row.vendor_session_id,
        fingerprint=row.fingerprint,
        cwd=row.cwd,
        clear_generation=row.clear_generation,
        created_at=row.created_at,
        updated_at=row.updated_at,
        cursor=row.cursor,
        last_used_at=row.last_used_at,
        checkpoint_id=row.checkpoint_id,
    )


def _message(row: SessionMessageRow) -> SessionMessage:
    assert row.id is not None
    return SessionMessage(
        id=row.id,
        session_id=row.session_id,
        seq=row.seq,
        role=row.role,
        text=row.text,
        run_id=row.run_id,
        adapter=row.adapter,
        clear_generation=row.clear_generation,
        created_at=row.created_at,
    )


def _checkpoint(row: SessionCheckpointRow) -> Checkpoint:
    assert row.id is not None
    return Checkpoint(
        id=row.id,
        session_id=row.session_id,
        clear_generation=row.clear_generation,
        first_seq=row.first_seq,
        through_seq=row.through_seq,
        summary=row.summary,
        covered_chars=row.covered_chars,
        created_at=row.created_at,
    )


def is_child_key(key: str) -> bool:
    """Whether a reuse key is a child task key (``<adapter>::<lineage>``, seed 003)."""
    return CHILD_KEY_SEPARATOR in key


@dataclass(frozen=True)
class RootVendorSave:
    """The vendor session a root turn saves (:meth:`ReuseStoreMixin.save_root_turn`); fields as
    :meth:`ReuseStoreMixin.save_vendor_session`'s (``cursor``: used when no answer is appended)."""

    key: str
    vendor_session_id: str
    fingerprint: str
    cwd: str
    cursor: int
    checkpoint_id: int | None


@dataclass(frozen=True)
class KeptTurn:
    """What :meth:`ReuseStoreMixin.save_root_turn` kept.

    Attributes:
        message: The appended answer, or None.
        vendor_session: The saved vendor record, or None (not asked, or refused).
        uncovered_chars: :meth:`ReuseStoreMixin.uncovered_chars` after the save, when measured.
    """

    message: SessionMessage | None
    vendor_session: VendorSession | None
    uncovered_chars: int | None


def _check_vendor_save(key: str, cursor: int, max_children: int) -> None:
    if not key:
        raise InvalidRequestError("a vendor session key must not be empty")
    if cursor < 0:
        raise InvalidRequestError(f"cursor must be a message seq >= 0, got {cursor}")
    if max_children < 1:
        raise InvalidRequestError(f"max_children must be at least 1, got {max_children}")


class ReuseStoreMixin(StoreMixin):
    """Vendor session records, the session transcript and checkpoints; see the module docstring.

    Mixed into :class:`~octipusd.store.Store`, which provides ``_tx``, ``_clock``,
    ``_lock_session`` and ``_session_record``.
    """

    # Vendor sessions ---------------------------------------------------------------------

    def get_vendor_session(self, session_id: str, key: str) -> VendorSession | None:
        """Return the vendor session stored under ``(session_id, key)`` for reuse.

        Args:
            session_id: The Octipus session.
            key: Reuse key: the adapter name for the root conversation, ``"<adapter>::<key>"``
                for a child task.

        Returns:
            The record, or None when there is none, when it was saved in an older clear
            generation than the session's current one (stale after ``/clear``), or when the
            session does not exist.

        Raises:
            StoreError: The database failed.
        """
        with self._tx(f"reading vendor session {key!r} of session {session_id}") as db:
            row = db.exec(
                select(VendorSessionRow)
                .join(SessionRow, col(SessionRow.id) == col(VendorSessionRow.session_id))
                .where(
                    col(VendorSessionRow.session_id) == session_id,
                    col(VendorSessionRow.key) == key,
                    col(VendorSessionRow.clear_generation) == col(SessionRow.clear_generation),
                )
            ).first()
            return _vendor_session(row) if row is not None else None

    def list_vendor_sessions(self, session_id: str) -> list[VendorSession]:
        """Return the session's vendor records of its current clear generation, by key.

        Args:
            session_id: The Octipus session (an unknown id gives an empty list).

        Returns:
            Root and child records, ordered by ``key``; stale records are left out.

        Raises:
            StoreError: The database failed.
        """
        with self._tx(f"listing vendor sessions of session {session_id}") as db:
            rows = db.exec(
                select(VendorSessionRow)
                .join(SessionRow, col(SessionRow.id) == col(VendorSessionRow.session_id))
                .where(
                    col(VendorSessionRow.session_id) == session_id,
                    col(VendorSessionRow.clear_generation) == col(SessionRow.clear_generation),
                )
                .order_by(col(VendorSessionRow.key))
            ).all()
            return [_vendor_session(r) for r in rows]

    def save_vendor_session(
        self,
        *,
        session_id: str,
        key: str,
        vendor_session_id: str,
        fingerprint: str,
        cwd: str,
        cursor: int = 0,
        generation: int | None = None,
        checkpoint_id: int | None = None,
        expect_vendor_session_id: str | _Unset | None = UNSET,
        max_children: int = MAX_CHILD_SESSIONS,
    ) -> VendorSession | None:
        """Insert or replace the vendor session stored under ``(session_id, key)``.

        One write transaction that locks the session row. Nothing is written (and None is
        returned) when ``generation`` is not the session's current clear generation, or when
        the ``expect_vendor_session_id`` condition fails. Otherwise the record gets the given
        values, ``clear_generation`` = the generation, ``last_used_at`` = ``updated_at`` = now;
        an existing record keeps its ``id`` and ``created_at``. After saving a child key
        (containing ``"::"``), the session's least recently used child records beyond
        ``max_children`` are deleted in the same transaction (never the one just saved; root
        records are never pruned).

        Args:
            session_id: The Octipus session.
            key: Reuse key: the adapter name (root) or ``"<adapter>::<key>"`` (child task).
            vendor_session_id: The vendor's conversation id.
            fingerprint: Fingerprint of the launch settings.
            cwd: Working folder of the vendor process.
            cursor: Highest session message ``seq`` the vendor conversation has seen (0 = none).
            generation: The clear generation the run read when it started; None for the
                session's current one.
            checkpoint_id: The checkpoint (of this session) a cold start carried, or None. A
                checkpoint of another clear generation makes the save stale (None returned).
            expect_vendor_session_id: When given, save only if the record currently stored
                (in the current generation) holds this vendor id; None means "only if there is
                no record". :data:`UNSET` (the default) saves unconditionally.
            max_children: Child task records kept per session (at least 1).

        Returns:
            The stored record, or None when nothing was written (stale generation, or the
            expectation did not hold).

        Raises:
            InvalidRequestError: ``key`` is empty, ``cursor`` < 0, ``max_children`` < 1, or
                ``checkpoint_id`` is not a checkpoint of this session.
            NotFoundError: No such session.
            StoreError: The database failed.
        """
        _check_vendor_save(key, cursor, max_children)
        with self._tx(f"saving vendor session {key!r} of session {session_id}", write=True) as db:
            session = self._lock_session(db, session_id)
            if generation is not None and generation != session.clear_generation:
                return None
            return self._save_vendor_session_in(
                db,
                session,
                key=key,
                vendor_session_id=vendor_session_id,
                fingerprint=fingerprint,
                cwd=cwd,
                cursor=cursor,
                checkpoint_id=checkpoint_id,
                expect_vendor_session_id=expect_vendor_session_id,
                max_children=max_children,
            )

    def _save_vendor_session_in(
        self,
        db: DbSession,
        session: SessionRow,
        *,
        key: str,
        vendor_session_id: str,
        fingerprint: str,
        cwd: str,
        cursor: int,
        checkpoint_id: int | None,
        expect_vendor_session_id: str | _Unset | None = UNSET,
        max_children: int = MAX_CHILD_SESSIONS,
    ) -> VendorSession | None:
        """:meth:`save_vendor_session` in ``db``, the session row locked and its generation checked."""
        session_id, current = session.id, session.clear_generation
        row = db.exec(
            select(VendorSessionRow).where(
                col(VendorSessionRow.session_id) == session_id, col(VendorSessionRow.key) == key
            )
        ).first()
        if expect_vendor_session_id is not UNSET:
            held = row.vendor_session_id if row is not None and row.clear_generation == current else None
            if held != expect_vendor_session_id:
                return None
        if checkpoint_id is not None:
            checkpoint = db.get(SessionCheckpointRow, checkpoint_id)
            if checkpoint is None or checkpoint.session_id != session_id:
                raise InvalidRequestError(
                    f"checkpoint {checkpoint_id} is not a checkpoint of session {session_id}"
                )
            if checkpoint.clear_generation != current:
                return None
        now = self._clock()
        values: dict[str, Any] = {
            "vendor_session_id": vendor_session_id,
            "fingerprint": fingerprint,
            "cwd": cwd,
            "cursor": cursor,
            "checkpoint_id": checkpoint_id,
            "clear_generation": current,
            "last_used_at": now,
            "updated_at": now,
        }
        if row is None:
            row = VendorSessionRow(session_id=session_id, key=key, created_at=now, **values)
        else:
            for name, value in values.items():
                setattr(row, name, value)
        db.add(row)
        db.flush()
        assert row.id is not None
        if is_child_key(key):
            self._prune_child_sessions(db, session_id, keep_id=row.id, max_children=max_children)
        return _vendor_session(row)

    @staticmethod
    def _prune_child_sessions(db: DbSession, session_id: str, *, keep_id: int, max_children: int) -> None:
        """Delete the least recently used child records beyond ``max_children`` (keeping ``keep_id``)."""
        surplus = db.exec(
            select(VendorSessionRow.id)
            .where(
                col(VendorSessionRow.session_id) == session_id,
                col(VendorSessionRow.key).contains(CHILD_KEY_SEPARATOR, autoescape=True),
                col(VendorSessionRow.id) != keep_id,
            )
            .order_by(col(VendorSessionRow.last_used_at).desc(), col(VendorSessionRow.id).desc())
            .offset(max_children - 1)
        ).all()
        if surplus:
            db.exec(delete(VendorSessionRow).where(col(VendorSessionRow.id).in_(list(surplus))))

    def drop_vendor_session(self, session_id: str, key: str, *, vendor_session_id: str | None = None) -> bool:
        """Delete the vendor session stored under ``(session_id, key)``.

        Args:
            session_id: The Octipus session.
            key: Reuse key.
            vendor_session_id: When given, delete only if the record still holds this vendor id
                (a record a concurrent run has replaced since is kept).

        Returns:
            True if a record was deleted, False if there was none (or it held another id).

        Raises:
            StoreError: The database failed.
        """
        statement = delete(VendorSessionRow).where(
            col(VendorSessionRow.session_id) == session_id, col(VendorSessionRow.key) == key
        )
        if vendor_session_id is not None:
            statement = statement.where(col(VendorSessionRow.vendor_session_id) == vendor_session_id)
        with self._tx(f"dropping vendor session {key!r} of session {session_id}", write=True) as db:
            return bool(db.exec(statement).rowcount)

    def clear_session(self, session_id: str) -> Session:
        """``/clear``: start a new clear generation of the session.

        One transaction: the session's ``clear_generation`` is incremented, ``cleared_at`` and
        ``updated_at`` are set to now, and every vendor record of the session (root and child
        keys) is deleted. Messages and checkpoints stay, under their old generation. Writers
        still holding the old generation are refused from now on.

        Args:
            session_id: The session.

        Returns:
            The session after the clear.

        Raises:
            NotFoundError: No such session.
            StoreError: The database failed.
        """
        with self._tx(f"clearing session {session_id}", write=True) as db:
            row = self._lock_session(db, session_id)
            now = self._clock()
            row.clear_generation += 1
            row.cleared_at = now
            row.updated_at = now
            db.add(row)
            db.exec(delete(VendorSessionRow).where(col(VendorSessionRow.session_id) == session_id))
            db.flush()
            return self._session_record(row)

    # Messages ----------------------------------------------------------------------------

    def append_message(
        self,
        session_id: str,
        *,
        role: str,
        text: str,
        run_id: str | None = None,
        adapter: str | None = None,
        generation: int | None = None,
    ) -> SessionMessage | None:
        """Append a message to the session's transcript.

        Locks the session row: concurrent callers get distinct, increasing ``seq`` values
        (the session's highest so far plus one, across every generation).

        Args:
            session_id: The session.
            role: ``user`` or ``assistant``.
            text: The message text.
            run_id: The run that wrote it (a run of this session), or None.
            adapter: The adapter that produced it, or None.
            generation: The clear generation the writer read; None for the current one.

        Returns:
            The stored message (its ``clear_generation`` the current one), or None when
            ``generation`` is not the session's current clear generation (nothing written).

        Raises:
            InvalidRequestError: ``role`` is not ``user`` or ``assistant``, or ``run_id`` is a
                run of another session.
            NotFoundError: No such session, or no run ``run_id``.
            StoreError: The database failed.
        """
        if role not in MESSAGE_ROLES:
            raise InvalidRequestError(f"message role must be one of {', '.join(MESSAGE_ROLES)}, got {role!r}")
        with self._tx(f"appending a message to session {session_id}", write=True) as db:
            session = self._lock_session(db, session_id)
            if generation is not None and generation != session.clear_generation:
                return None
            return self._append_message_in(db, session, role=role, text=text, run_id=run_id, adapter=adapter)

    def _append_message_in(
        self,
        db: DbSession,
        session: SessionRow,
        *,
        role: str,
        text: str,
        run_id: str | None,
        adapter: str | None,
    ) -> SessionMessage:
        """:meth:`append_message` in ``db``, the session row locked and its generation checked."""
        session_id = session.id
        if run_id is not None:
            self._run_of_session(db, run_id, session_id)
        highest = db.exec(
            select(func.max(SessionMessageRow.seq)).where(col(SessionMessageRow.session_id) == session_id)
        ).one()
        row = SessionMessageRow(
            session_id=session_id,
            seq=(highest or 0) + 1,
            role=role,
            text=text,
            run_id=run_id,
            adapter=adapter,
            clear_generation=session.clear_generation,
            created_at=self._clock(),
        )
        db.add(row)
        db.flush()
        return _message(row)

    def save_root_turn(
        self,
        session_id: str,
        *,
        generation: int,
        run_id: str,
        adapter: str,
        answer: str | None,
        vendor: RootVendorSave | None,
        measure: bool = False,
    ) -> KeptTurn:
        """Keep what a root turn leaves for the next one, in one write transaction: its answer joins
        the transcript (:meth:`append_message`), then its vendor session is saved
        (:meth:`save_vendor_session`) with the answer's ``seq`` as its cursor (without an answer,
        ``vendor.cursor``).

        Args:
            session_id: The session.
            generation: The clear generation the turn read: once the session moved on, nothing is
                written.
            run_id: The turn's run.
            adapter: The adapter that answered.
            answer: The assistant message's text, or None (nothing appended).
            vendor: The vendor session to save, or None.
            measure: Also measure :meth:`uncovered_chars` afterwards, in the same transaction.

        Returns:
            What was kept.

        Raises:
            As :meth:`append_message` and :meth:`save_vendor_session`.
        """
        if vendor is not None:
            _check_vendor_save(vendor.key, vendor.cursor, MAX_CHILD_SESSIONS)
        with self._tx(f"keeping turn {run_id} of session {session_id}", write=True) as db:
            session = self._lock_session(db, session_id)
            if generation != session.clear_generation:
                return KeptTurn(None, None, None)
            message = saved = None
            if answer is not None:
                message = self._append_message_in(
                    db, session, role="assistant", text=answer, run_id=run_id, adapter=adapter
                )
            if vendor is not None:
                saved = self._save_vendor_session_in(
                    db,
                    session,
                    key=vendor.key,
                    vendor_session_id=vendor.vendor_session_id,
                    fingerprint=vendor.fingerprint,
                    cwd=vendor.cwd,
                    cursor=message.seq if message is not None else vendor.cursor,
                    checkpoint_id=vendor.checkpoint_id,
                )
            size = int(db.exec(self._uncovered_query(session_id)).one()) if measure else None
            return KeptTurn(message, saved, size)

    def list_messages(
        self, session_id: str, *, generation: int, after_seq: int = 0, through_seq: int | None = None
    ) -> list[SessionMessage]:
        """Return the session's messages of one clear generation, in ``seq`` order.

        Args:
            session_id: The session (an unknown id gives an empty list).
            generation: The clear generation.
            after_seq: Only messages with ``seq > after_seq`` (e.g. a vendor record's cursor).
            through_seq: Only messages with ``seq <= through_seq``; None for no upper bound.

        Returns:
            The messages.

        Raises:
            StoreError: The database failed.
        """
        query = select(SessionMessageRow).where(
            col(SessionMessageRow.session_id) == session_id,
            col(SessionMessageRow.clear_generation) == generation,
            col(SessionMessageRow.seq) > after_seq,
        )
        if through_seq is not None:
            query = query.where(col(SessionMessageRow.seq) <= through_seq)
        with self._tx(f"listing messages of session {session_id}") as db:
            return [_message(r) for r in db.exec(query.order_by(col(SessionMessageRow.seq))).all()]

    def uncovered_chars(self, session_id: str) -> int:
        """Characters of text of the session's messages of its current clear generation after its
        latest checkpoint (what a compaction would summarize): one aggregate statement.

        Args:
            session_id: The session (an unknown id gives 0).

        Raises:
            StoreError: The database failed.
        """
        with self._tx(f"measuring the uncovered transcript of session {session_id}") as db:
            return int(db.exec(self._uncovered_query(session_id)).one())

    @staticmethod
    def _uncovered_query(session_id: str) -> SelectOfScalar[int]:
        """The statement of :meth:`uncovered_chars`."""
        generation = (
            select(SessionRow.clear_generation).where(col(SessionRow.id) == session_id).scalar_subquery()
        )
        covered = (
            select(func.coalesce(func.max(SessionCheckpointRow.through_seq), 0))
            .where(
                col(SessionCheckpointRow.session_id) == session_id,
                col(SessionCheckpointRow.clear_generation) == generation,
            )
            .scalar_subquery()
        )
        return select(func.coalesce(func.sum(func.length(SessionMessageRow.text)), 0)).where(
            col(SessionMessageRow.session_id) == session_id,
            col(SessionMessageRow.clear_generation) == generation,
            col(SessionMessageRow.seq) > covered,
        )

    # Checkpoints -------------------------------------------------------------------------

    def publish_checkpoint(
        self,
        session_id: str,
        *,
        generation: int,
        first_seq: int,
        through_seq: int,
        summary: str,
        covered_chars: int,
        rotate_keys: Sequence[str],
    ) -> Checkpoint | None:
        """Publish a compaction checkpoint and rotate the root vendor records, atomically.

        One transaction that locks the session row: the checkpoint is inserted and the
        vendor records of the session whose key is in ``rotate_keys`` are deleted, so the next
        launch starts cold with the checkpoint plus its suffix. Child task records are kept.

        Args:
            session_id: The session.
            generation: The clear generation whose messages the summary covers.
            first_seq: ``seq`` of the first message covered (>= 1).
            through_seq: ``seq`` of the last message covered (>= ``first_seq``, and beyond
                the latest checkpoint of this generation).
            summary: The summary text.
            covered_chars: Characters of message text the summary replaces (>= 0).
            rotate_keys: Root vendor keys to drop (e.g. ``["claude-code", "codex"]``); child
                keys (containing ``"::"``) are refused.

        Returns:
            The checkpoint, or None when ``generation`` is not the session's current clear
            generation (nothing written, nothing rotated).

        Raises:
            InvalidRequestError: ``through_seq`` < ``first_seq``, ``first_seq`` < 1,
                ``covered_chars`` < 0, ``through_seq`` not beyond the latest checkpoint of the
                generation, or ``rotate_keys`` is a single string or names a child key.
            NotFoundError: No such session.
            StoreError: The database failed.
        """
        if isinstance(rotate_keys, str):
            raise InvalidRequestError("rotate_keys must be a sequence of keys, not one string")
        keys = list(dict.fromkeys(rotate_keys))
        children = [k for k in keys if is_child_key(k)]
        if children:
            raise InvalidRequestError(
                f"compaction rotates only root vendor sessions; child keys given: {', '.join(children)}"
            )
        if first_seq < 1:
            raise InvalidRequestError(f"first_seq must be at least 1, got {first_seq}")
        if through_seq < first_seq:
            raise InvalidRequestError(f"through_seq ({through_seq}) is before first_seq ({first_seq})")
        if covered_chars < 0:
            raise InvalidRequestError(f"covered_chars must be >= 0, got {covered_chars}")
        with self._tx(f"publishing a checkpoint of session {session_id}", write=True) as db:
            session = self._lock_session(db, session_id)
            if generation != session.clear_generation:
                return None
            latest = db.exec(
                select(func.max(SessionCheckpointRow.through_seq)).where(
                    col(SessionCheckpointRow.session_id) == session_id,
                    col(SessionCheckpointRow.clear_generation) == generation,
                )
            ).one()
            if latest is not None and through_seq <= latest:
                raise InvalidRequestError(
                    f"a checkpoint of session {session_id} already covers through seq {latest}; "
                    f"a new one must cover beyond it (through_seq {through_seq})"
                )
            row = SessionCheckpointRow(
                session_id=session_id,
                clear_generation=generation,
                first_seq=first_seq,
                through_seq=through_seq,
                summary=summary,
                covered_chars=covered_chars,
                created_at=self._clock(),
            )
            db.add(row)
            db.flush()
            if keys:
                db.exec(
                    delete(VendorSessionRow).where(
                        col(VendorSessionRow.session_id) == session_id, col(VendorSessionRow.key).in_(keys)
                    )
                )
            return _checkpoint(row)

    def latest_checkpoint(self, session_id: str, generation: int) -> Checkpoint | None:
        """Return the checkpoint of ``generation`` covering the most messages, or None.

        Args:
            session_id: The session (an unknown id gives None).
            generation: The clear generation.

        Returns:
            The checkpoint with the highest ``through_seq`` of that generation, or None.

        Raises:
            StoreError: The database failed.
        """
        with self._tx(f"reading the latest checkpoint of session {session_id}") as db:
            row = db.exec(
                select(SessionCheckpointRow)
                .where(
                    col(SessionCheckpointRow.session_id) == session_id,
                    col(SessionCheckpointRow.clear_generation) == generation,
                )
                .order_by(col(SessionCheckpointRow.through_seq).desc())
                .limit(1)
            ).first()
            return _checkpoint(row) if row is not None else None
