"""Store reads of the start of a turn, in one transaction (mixed into :class:`Store`).

A turn starts from its session, the session's model row and, for a root turn, what session reuse
kept (seed 003 "Session reuse"): the root vendor record and the latest checkpoint. Read one by one
these are four transactions and four thread hops on the turn's path; :meth:`TurnStoreMixin.read_turn`
reads them together, from one snapshot. Same conventions as ``repository.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import col, select

from octipusd.errors import NotFoundError
from octipusd.store.codec import StoreMixin
from octipusd.store.model_row_store import ModelRowStoreMixin, _model_row
from octipusd.store.models import SessionCheckpointRow, SessionRow, VendorSessionRow
from octipusd.store.records import Checkpoint, ModelRow, Session, VendorSession
from octipusd.store.reuse_store import _checkpoint, _vendor_session

__all__ = ["TurnRecords", "TurnStoreMixin"]


@dataclass(frozen=True)
class TurnRecords:
    """What :meth:`TurnStoreMixin.read_turn` read.

    Attributes:
        session: The session.
        model_row: Its model row, or None (no row, or deleted: the session keeps a copy).
        vendor_session: The root vendor record (key: the session's adapter name) of the session's
            current clear generation, or None (none, or reuse not asked for).
        checkpoint: The latest checkpoint of the asked generation, or None.
    """

    session: Session
    model_row: ModelRow | None
    vendor_session: VendorSession | None
    checkpoint: Checkpoint | None


class TurnStoreMixin(StoreMixin):
    """The start of a turn's reads; see the module docstring."""

    def read_turn(self, session_id: str, *, generation: int | None) -> TurnRecords:
        """Read a session, its model row and, when asked, its root reuse records, in one transaction.

        Args:
            session_id: The session.
            generation: The clear generation the turn was posted in, whose latest checkpoint to
                read along with the root vendor record (as
                :meth:`~octipusd.store.Store.get_vendor_session` and
                :meth:`~octipusd.store.Store.latest_checkpoint` would); None reads neither (a
                child run, which has its own reuse key).

        Raises:
            NotFoundError: No such session.
            StoreError: The database failed.
        """
        with self._tx(f"reading the turn basis of session {session_id}") as db:
            row = db.get(SessionRow, session_id)
            if row is None:
                raise NotFoundError(f"session {session_id} not found")
            model_row = None
            if row.model_row_id is not None:
                try:
                    model_row = _model_row(ModelRowStoreMixin._find_model_row(db, row.model_row_id))
                except NotFoundError:
                    model_row = None
            if generation is None:
                return TurnRecords(self._session_record(row), model_row, None, None)
            vendor = db.exec(
                select(VendorSessionRow).where(
                    col(VendorSessionRow.session_id) == session_id,
                    col(VendorSessionRow.key) == row.adapter,
                    col(VendorSessionRow.clear_generation) == row.clear_generation,
                )
            ).first()
            checkpoint = db.exec(
                select(SessionCheckpointRow)
                .where(
                    col(SessionCheckpointRow.session_id) == session_id,
                    col(SessionCheckpointRow.clear_generation) == generation,
                )
                .order_by(col(SessionCheckpointRow.through_seq).desc())
                .limit(1)
            ).first()
            return TurnRecords(
                self._session_record(row),
                model_row,
                _vendor_session(vendor) if vendor is not None else None,
                _checkpoint(checkpoint) if checkpoint is not None else None,
            )
