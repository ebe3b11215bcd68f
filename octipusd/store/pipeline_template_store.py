"""Store methods for stored pipeline templates (mixed into :class:`Store`).

FACTS.md §6 "Lookup": a template belongs to the user who imported it (``owner``) or to nobody
(``owner`` NULL: every user sees it). Names are unique per owner, unowned ones included: the table's
unique constraint cannot see two NULL owners as equal, so a create checks under a lock (SQLite's
writes are serial; on PostgreSQL an advisory transaction lock on the owner and name). The document
is the template's export envelope; this module stores it as given, the caller
(``pipelines.template_service``) has checked it. Presets ship with the package and are not rows.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from sqlalchemy import or_, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ConflictError, NotFoundError
from octipusd.store.codec import StoreMixin, check_limit, dump_object, load_object, new_id
from octipusd.store.models import PipelineTemplateRow
from octipusd.store.pipeline_records import PipelineTemplateRecord

__all__ = ["TEMPLATE_LIST_LIMIT", "PipelineTemplateStoreMixin"]

#: Most stored templates one listing returns.
TEMPLATE_LIST_LIMIT: Final = 1000


def _record(row: PipelineTemplateRow) -> PipelineTemplateRecord:
    return PipelineTemplateRecord(
        id=row.id,
        name=row.name,
        owner=row.owner,
        description=row.description,
        document=load_object(row.document),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _whose(owner: str | None) -> str:
    return "unowned" if owner is None else f"of {owner!r}"


class PipelineTemplateStoreMixin(StoreMixin):
    """Stored pipeline templates (create, read, list, delete); see the module docstring."""

    def _lock_template_name(self, db: DbSession, owner: str | None, name: str) -> None:
        if self._sqlite:
            return
        digest = hashlib.sha256(f"pipeline_templates\0{owner}\0{name}".encode()).digest()
        db.connection().execute(
            text("SELECT pg_advisory_xact_lock(:k)"), {"k": int.from_bytes(digest[:8], "big", signed=True)}
        )

    def create_pipeline_template(
        self, *, name: str, owner: str | None, description: str | None, document: dict[str, Any]
    ) -> PipelineTemplateRecord:
        """Store a template.

        Args:
            name: Its name, unique among the owner's templates (or among unowned ones).
            owner: The importing user, or None for a template every user sees.
            description: Its description.
            document: Its export envelope (a JSON object).

        Returns:
            The stored template (id: 32 hex characters).

        Raises:
            ConflictError: The owner already has a template of that name (the message names it).
            InvalidRequestError: ``document`` is not a JSON object.
            StoreError: The database failed.
        """
        encoded = dump_object(document, "document")
        now = self._clock()
        row = PipelineTemplateRow(
            id=new_id(),
            name=name,
            owner=owner,
            description=description,
            document=encoded,
            created_at=now,
            updated_at=now,
        )
        clash = ConflictError(
            f"a pipeline template named {name!r} ({_whose(owner)}) already exists; choose another name"
        )
        with self._tx(f"storing pipeline template {name!r}", write=True) as db:
            self._lock_template_name(db, owner, name)
            query = select(PipelineTemplateRow.id).where(col(PipelineTemplateRow.name) == name)
            query = query.where(
                col(PipelineTemplateRow.owner).is_(None)
                if owner is None
                else col(PipelineTemplateRow.owner) == owner
            )
            if db.exec(query).first() is not None:
                raise clash
            db.add(row)
            try:
                db.flush()
            except IntegrityError as exc:
                raise clash from exc
        return _record(row)

    def get_pipeline_template(self, template_id: str) -> PipelineTemplateRecord:
        """The stored template with that id.

        Raises:
            NotFoundError: None has it.
            StoreError: The database failed.
        """
        with self._tx(f"reading pipeline template {template_id!r}") as db:
            row = db.get(PipelineTemplateRow, template_id)
            if row is None:
                raise NotFoundError(f"pipeline template {template_id!r} not found")
            return _record(row)

    def list_pipeline_templates(
        self, owner: str | None, *, limit: int = TEMPLATE_LIST_LIMIT
    ) -> list[PipelineTemplateRecord]:
        """The templates ``owner`` sees: its own and the unowned ones, by name (own first on a tie).

        Args:
            owner: The user; None lists the unowned templates only.
            limit: Most templates returned.

        Raises:
            InvalidRequestError: ``limit`` is below 1.
            StoreError: The database failed.
        """
        check_limit(limit)
        owned = col(PipelineTemplateRow.owner)
        visible = owned.is_(None) if owner is None else or_(owned == owner, owned.is_(None))
        query = (
            select(PipelineTemplateRow)
            .where(visible)
            .order_by(col(PipelineTemplateRow.name), owned.is_(None), col(PipelineTemplateRow.id))
            .limit(limit)
        )
        with self._tx("listing pipeline templates") as db:
            return [_record(r) for r in db.exec(query).all()]

    def delete_pipeline_template(self, template_id: str, owner: str | None) -> None:
        """Delete a template ``owner`` owns (None: an unowned one).

        Raises:
            NotFoundError: ``owner`` has no template with that id.
            StoreError: The database failed.
        """
        with self._tx(f"deleting pipeline template {template_id!r}", write=True) as db:
            row = db.get(PipelineTemplateRow, template_id, with_for_update=True)
            if row is None or row.owner != owner:
                raise NotFoundError(
                    f"pipeline template {template_id!r} not found among {_whose(owner)} templates"
                )
            db.delete(row)
