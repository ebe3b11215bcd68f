"""Store methods for model rows, the named launch configurations (mixed into :class:`Store`).

A session created from a row keeps ``model_row_id`` and mirrors the row's adapter, model and
permission mode (:data:`MIRRORED_FIELDS`; see :meth:`ModelRowStoreMixin.update_model_row` and
:meth:`ModelRowStoreMixin.delete_model_row`). Lock order when both are locked: the model row
first, then sessions. Same conventions as ``repository.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import delete, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError
from octipusd.store.codec import StoreMixin, dump_object, load_object, load_strings, new_id
from octipusd.store.models import ModelRowRow, SessionRow
from octipusd.store.records import ModelRow
from octipusd.store.validation import (
    check_additive_flags_shape,
    check_binary,
    check_metadata,
    check_model_name,
    check_model_row_name,
    check_permission_mode,
)

__all__ = ["MIRRORED_FIELDS", "MODEL_ROW_UPDATABLE_FIELDS", "ModelRowStoreMixin"]

#: Model row fields :meth:`ModelRowStoreMixin.update_model_row` may change.
MODEL_ROW_UPDATABLE_FIELDS: frozenset[str] = frozenset(
    {"name", "adapter", "binary", "model", "permission_mode", "additive_flags", "metadata"}
)

#: Model row fields a linked session mirrors (copied by create, update and delete).
MIRRORED_FIELDS: tuple[str, ...] = ("adapter", "model", "permission_mode")


def _model_row(row: ModelRowRow) -> ModelRow:
    return ModelRow(
        id=row.id,
        name=row.name,
        adapter=row.adapter,
        binary=row.binary,
        model=row.model,
        permission_mode=row.permission_mode,
        additive_flags=load_strings(row.additive_flags),
        metadata=load_object(row.meta),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _check_adapter_name(adapter: object) -> str:
    if not isinstance(adapter, str) or not adapter.strip():
        raise InvalidRequestError(f"adapter must be a non-empty adapter name, got {adapter!r}")
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
            values["meta"] = dump_object(check_metadata(value), "metadata")
        else:
            values[key] = checks[key](value)
    return values


class ModelRowStoreMixin(StoreMixin):
    """Model rows (create, read, list, update, delete); see the module docstring."""

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
            InvalidRequestError: A field has a bad value or the wrong type (e.g.
                ``metadata.cliAgent`` not an object, ``metadata.cliAgent.sharedUse`` not a boolean,
                flags not a list of strings); the message names it and what is accepted.
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
        row = ModelRowRow(id=new_id(), created_at=now, updated_at=now, **values)
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
            ValueError: An unknown field (a caller's bug).
            InvalidRequestError: A bad value, or a value of the wrong type.
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
            before = {f: getattr(row, f) for f in MIRRORED_FIELDS}
            for key, value in values.items():
                setattr(row, key, value)
            now = self._clock()
            row.updated_at = now
            db.add(row)
            self._flush_unique_name(db, row.name)
            after = {f: getattr(row, f) for f in MIRRORED_FIELDS}
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
                    session.options = dump_object({**cli_agent, **load_object(session.options)}, "options")
                session.model_row_id = None
                session.updated_at = now
                db.add(session)
            db.flush()
            db.exec(
                delete(ModelRowRow)
                .where(col(ModelRowRow.id) == row.id)
                .execution_options(synchronize_session=False)
            )
