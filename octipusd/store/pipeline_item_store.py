"""Store methods for a pipeline's plan items and their queued edits (mixed into :class:`Store`).

Seed 003: ``update_pipeline_items({id, skip, add, order, evidence})`` queues changes atomically for
the next item boundary (:meth:`PipelineItemStoreMixin.queue_item_changes`), where the walker applies
them (:meth:`PipelineItemStoreMixin.apply_item_changes`); edits to a stopped or paused run apply
before its resume. Completed items keep their results; new items are appended; ``order`` lists
existing items first, followed by unlisted items. ``resume_pipeline({skipItems, evidence})`` checks
every id first and skips nothing if one is unknown (:meth:`PipelineItemStoreMixin.skip_pipeline_items`).
Every write locks the pipeline's row first (``pipeline_store.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError
from octipusd.store.codec import new_id
from octipusd.store.models import PipelineItemRow, PipelineRow
from octipusd.store.pipeline_records import ItemStatus, PipelineItem, PipelineStatus
from octipusd.store.pipeline_store import PipelineStoreMixin, item_record, lock_pipeline
from octipusd.toolkit.pipelines import (
    MAX_ITEM_TEXT_CHARS,
    MAX_ITEM_TITLE_CHARS,
    MAX_PIPELINE_ITEMS,
    ItemChanges,
    ItemDraft,
)

__all__ = [
    "MAX_ITEM_TEXT_CHARS",
    "MAX_ITEM_TITLE_CHARS",
    "MAX_PIPELINE_ITEMS",
    "ItemChanges",
    "ItemDraft",
    "PipelineItemStoreMixin",
]


class PipelineItemStoreMixin(PipelineStoreMixin):
    """A pipeline's plan items and their queued edits (beside the run's methods it extends); see the
    module docstring."""

    def list_pipeline_items(self, pipeline_id: str) -> list[PipelineItem]:
        """The pipeline's items in their order (re-read by the loop on every pass).

        Raises:
            NotFoundError: No such pipeline.
            StoreError: The database failed.
        """
        with self._tx(f"reading the items of pipeline {pipeline_id}") as db:
            if db.get(PipelineRow, pipeline_id) is None:
                raise NotFoundError(f"pipeline {pipeline_id} not found")
            return [item_record(r) for r in self._item_rows(db, pipeline_id)]

    def add_pipeline_items(
        self,
        pipeline_id: str,
        drafts: Sequence[ItemDraft],
        *,
        node_key: str | None = None,
        user: str | None = None,
        skip_known_titles: bool = False,
    ) -> list[PipelineItem]:
        """Append items (``pending``) after the last one.

        Args:
            node_key: The stage that made them (a ``producesPlan`` stage), or None.
            user: The person who added them, or None.
            skip_known_titles: Leave out a draft whose title is already an item's (``plan__add_items``).

        Returns:
            The items added.

        Raises:
            InvalidRequestError: A draft is malformed (named ``add[i]``), or the pipeline would hold more
                than :data:`MAX_PIPELINE_ITEMS` items; nothing is added.
            NotFoundError: No such pipeline.
            StoreError: The database failed.
        """
        checked = [d.checked(f"add[{i}]") for i, d in enumerate(drafts)]
        with self._tx(f"adding items to pipeline {pipeline_id}", write=True) as db:
            lock_pipeline(db, pipeline_id)
            added = self._append_items(db, pipeline_id, checked, node_key, user, skip_known_titles)
            return [item_record(r) for r in added]

    def set_pipeline_item(
        self, item_id: str, status: ItemStatus, *, result: str | None = None, error: str | None = None
    ) -> PipelineItem:
        """Set an item's status (and its result or error).

        Raises:
            NotFoundError: No such item.
            StoreError: The database failed.
        """
        with self._tx(f"setting pipeline item {item_id}", write=True) as db:
            row = db.get(PipelineItemRow, item_id)
            if row is None:
                raise NotFoundError(f"pipeline item {item_id} not found")
            lock_pipeline(db, row.pipeline_id)
            row.status = status.value
            if result is not None:
                row.result = result
            row.error = error
            row.updated_at = self._clock()
            db.add(row)
            return item_record(row)

    def queue_item_changes(self, pipeline_id: str, changes: ItemChanges) -> list[dict[str, Any]]:
        """Queue ``changes`` for the next item boundary, atomically: every id is checked first.

        Returns:
            The pipeline's queue after this change.

        Raises:
            InvalidRequestError: An id in ``skip`` or ``order`` is no item of the pipeline, a draft is
                malformed (each named), or the items plus every queued addition would pass
                :data:`MAX_PIPELINE_ITEMS` (``add``); nothing is queued.
            ConflictError: The pipeline is completed, or ``skip`` names the item a running pipeline is
                in now (stop it first).
            NotFoundError: No such pipeline.
            StoreError: The database failed.
        """
        checked = ItemChanges(
            skip=changes.skip,
            add=tuple(d.checked(f"add[{i}]") for i, d in enumerate(changes.add)),
            order=changes.order,
            evidence=changes.evidence,
            user=changes.user,
        )
        with self._tx(f"queueing item changes of pipeline {pipeline_id}", write=True) as db:
            row = lock_pipeline(db, pipeline_id)
            status = PipelineStatus(row.status)
            if status is PipelineStatus.COMPLETED:
                raise ConflictError(f"pipeline {pipeline_id} is completed: its items no longer change")
            rows = self._item_rows(db, pipeline_id)
            known = {r.id for r in rows}
            queue = json.loads(row.pending_changes)
            queued = sum(len(c.get("add") or ()) for c in queue if isinstance(c, dict))
            total = len(rows) + queued + len(checked.add)
            if checked.add and total > MAX_PIPELINE_ITEMS:
                raise InvalidRequestError(
                    f"add: pipeline {pipeline_id} would hold {total} items with the queued additions, "
                    f"over the limit of {MAX_PIPELINE_ITEMS}"
                )
            for field, ids in (("skip", checked.skip), ("order", checked.order)):
                for index, item_id in enumerate(ids):
                    if item_id not in known:
                        raise InvalidRequestError(
                            f"{field}[{index}]: pipeline {pipeline_id} has no item {item_id!r}"
                        )
            if status.active and row.current_item_id in checked.skip:
                raise ConflictError(
                    f"item {row.current_item_id} is the one pipeline {pipeline_id} is working on: stop the "
                    "pipeline before skipping it"
                )
            queue.append(checked.to_json())
            row.pending_changes = json.dumps(queue)
            db.add(row)
            return [c for c in queue if isinstance(c, dict)]

    def apply_item_changes(self, pipeline_id: str) -> list[dict[str, Any]]:
        """Apply the queued item edits in the order they were queued and empty the queue (the walker
        calls it at each item boundary and before a resume). A ``done`` item is never skipped.

        Returns:
            The changes applied (empty when none were queued).

        Raises:
            NotFoundError: No such pipeline.
            StoreError: The database failed.
        """
        with self._tx(f"applying item changes of pipeline {pipeline_id}", write=True) as db:
            row = lock_pipeline(db, pipeline_id)
            queue = [c for c in json.loads(row.pending_changes) if isinstance(c, dict)]
            if not queue:
                return []
            for raw in queue:
                change = ItemChanges.from_json(raw)
                self._skip(db, pipeline_id, change.skip, change.evidence)
                self._append_items(db, pipeline_id, list(change.add), None, change.user, False)
                if change.order:
                    self._reorder(db, pipeline_id, change.order)
            row.pending_changes = "[]"
            db.add(row)
            self._append_event(db, pipeline_id, "items_changed", {"changes": queue})
            return queue

    def skip_pipeline_items(
        self, pipeline_id: str, item_ids: Sequence[str], *, evidence: str | None
    ) -> list[PipelineItem]:
        """Mark items earlier work already delivered ``skipped`` and keep ``evidence`` on each
        (``resume_pipeline``'s ``skipItems``). Every id is checked first; a ``done`` item is left as it is.

        Raises:
            InvalidRequestError: An id is no item of the pipeline (named); nothing is skipped.
            NotFoundError: No such pipeline.
            StoreError: The database failed.
        """
        with self._tx(f"skipping items of pipeline {pipeline_id}", write=True) as db:
            lock_pipeline(db, pipeline_id)
            known = {r.id for r in self._item_rows(db, pipeline_id)}
            for index, item_id in enumerate(item_ids):
                if item_id not in known:
                    raise InvalidRequestError(
                        f"skipItems[{index}]: pipeline {pipeline_id} has no item {item_id!r}"
                    )
            skipped = self._skip(db, pipeline_id, item_ids, evidence)
            data = {"skipped": [r.id for r in skipped], "evidence": evidence}
            self._append_event(db, pipeline_id, "items_skipped", data)
            return [item_record(r) for r in skipped]

    # ------------------------------------------------------------------ helpers (caller holds the lock)

    @staticmethod
    def _item_rows(db: DbSession, pipeline_id: str) -> list[PipelineItemRow]:
        return list(
            db.exec(
                select(PipelineItemRow)
                .where(col(PipelineItemRow.pipeline_id) == pipeline_id)
                .order_by(col(PipelineItemRow.ordinal), col(PipelineItemRow.created_at))
            )
        )

    def _append_items(
        self,
        db: DbSession,
        pipeline_id: str,
        drafts: Sequence[ItemDraft],
        node_key: str | None,
        user: str | None,
        skip_known_titles: bool,
    ) -> list[PipelineItemRow]:
        rows = self._item_rows(db, pipeline_id)
        titles = {r.title for r in rows}
        if skip_known_titles:
            drafts = [d for d in drafts if d.title not in titles]
        if len(rows) + len(drafts) > MAX_PIPELINE_ITEMS:
            raise InvalidRequestError(
                f"add: pipeline {pipeline_id} would hold {len(rows) + len(drafts)} items, over the limit of "
                f"{MAX_PIPELINE_ITEMS}"
            )
        last = db.exec(
            select(func.max(PipelineItemRow.ordinal)).where(col(PipelineItemRow.pipeline_id) == pipeline_id)
        ).one()
        now: datetime = self._clock()
        added = []
        for offset, draft in enumerate(drafts, start=1):
            row = PipelineItemRow(
                id=new_id(),
                pipeline_id=pipeline_id,
                ordinal=(last or 0) + offset,
                title=draft.title,
                detail=draft.detail,
                acceptance=draft.acceptance,
                status=ItemStatus.PENDING.value,
                created_by_node_key=node_key,
                created_by_user=user,
                created_at=now,
                updated_at=now,
            )
            db.add(row)
            added.append(row)
        db.flush()
        return added

    def _skip(
        self, db: DbSession, pipeline_id: str, item_ids: Sequence[str], evidence: str | None
    ) -> list[PipelineItemRow]:
        skipped = []
        now = self._clock()
        for item_id in item_ids:
            row = db.get(PipelineItemRow, item_id)
            if row is None or row.pipeline_id != pipeline_id or row.status == ItemStatus.DONE.value:
                continue
            row.status, row.evidence, row.updated_at = ItemStatus.SKIPPED.value, evidence, now
            db.add(row)
            skipped.append(row)
        return skipped

    def _reorder(self, db: DbSession, pipeline_id: str, order: Sequence[str]) -> None:
        rows = self._item_rows(db, pipeline_id)
        by_id = {r.id: r for r in rows}
        listed = [by_id[i] for i in dict.fromkeys(order) if i in by_id]
        rest = [r for r in rows if r.id not in set(order)]
        now = self._clock()
        for ordinal, row in enumerate([*listed, *rest], start=1):
            if row.ordinal != ordinal:
                row.ordinal, row.updated_at = ordinal, now
                db.add(row)
