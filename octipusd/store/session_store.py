"""Store methods for sessions (mixed into :class:`Store`; their work plans: ``plan_store.py``).

A session created from a model row mirrors the row's adapter, model and permission mode (see
:mod:`octipusd.store.model_row_store`); deleting a session removes everything recorded under it.
Same conventions as ``repository.py``: one committed transaction per method, frozen records out.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, false as sa_false, or_
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError
from octipusd.store.codec import StoreMixin, check_limit, dump_object, load_object, new_id
from octipusd.store.model_row_store import MIRRORED_FIELDS
from octipusd.store.models import (
    ApprovalRow,
    ModelRowRow,
    PermissionGrantRow,
    PlanFeedbackRow,
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
from octipusd.store.records import RunStatus, Session
from octipusd.store.validation import check_session_options

__all__ = ["SessionStoreMixin"]


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
        options=load_object(row.options),
        flow_label=row.flow_label,
        space_id=row.space_id,
        clear_generation=row.clear_generation,
        cleared_at=row.cleared_at,
    )


class SessionStoreMixin(StoreMixin):
    """Sessions (create, read, list, touch, delete) and work plans; see the module docstring."""

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
                type-checked); None for ``{}``.
            space_id: The shared space the session belongs to (must exist and not be
                archived), or None for a personal session.

        Returns:
            The new session (id: 32 hex characters).

        Raises:
            InvalidRequestError: ``workspace`` is not an absolute path, ``adapter`` is empty,
                ``options`` is not a JSON-serialisable object, or a known key has the wrong type.
            NotFoundError: No model row ``model_row_id``, or no space ``space_id``.
            ConflictError: ``adapter``, ``model`` or ``permission_mode`` differ from the row's
                (the message lists the row's values), or the space is archived.
            StoreError: The database failed.
        """
        if not workspace.startswith("/"):
            raise InvalidRequestError(f"workspace must be an absolute path, got {workspace!r}")
        if not adapter:
            raise InvalidRequestError("adapter must not be empty")
        options_text = dump_object(
            check_session_options({} if options is None else options, in_space=space_id is not None),
            "options",
        )
        now = self._clock()
        row = SessionRow(
            id=new_id(),
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
                differing = [f for f in MIRRORED_FIELDS if getattr(source, f) != getattr(row, f)]
                if differing:
                    wanted = ", ".join(f"{f}={getattr(source, f)!r}" for f in MIRRORED_FIELDS)
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
            InvalidRequestError: ``limit`` < 1.
            StoreError: The database failed.
        """
        check_limit(limit)
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
        with (
            self._policy_change(f"deleting session {session_id}") as change,
            self._tx(f"deleting session {session_id}", write=True) as db,
        ):
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
            db.exec(delete(PlanFeedbackRow).where(col(PlanFeedbackRow.session_id) == session_id))
            db.exec(delete(WorkPlanRow).where(col(WorkPlanRow.session_id) == session_id))
            grant_ids = db.exec(
                select(PermissionGrantRow.id).where(col(PermissionGrantRow.session_id) == session_id)
            ).all()
            db.exec(delete(PermissionGrantRow).where(col(PermissionGrantRow.session_id) == session_id))
            change.drop_grants(grant_ids)
            db.exec(delete(RunRow).where(col(RunRow.session_id) == session_id))
            db.delete(session)
        self.forget_event_sequences(run_ids)
        self._policy_view.forget_label(session_id)
