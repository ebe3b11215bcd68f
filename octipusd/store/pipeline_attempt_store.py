"""Store methods for a pipeline's graph nodes and stage attempts (mixed into :class:`Store`).

Seed 003: every stage attempt has an id kept in its checkpoint; a resume after a stop, a failure or
a restart continues the same attempt (``reopen``), its text so far saved every 15 s and when it
fails (``save_incomplete_text``), never reported as the stage's output and cleared when the attempt
finishes. Every write locks the pipeline's row first (``pipeline_store.py``).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import NotFoundError
from octipusd.store.codec import dump_object, new_id
from octipusd.store.models import PipelineAttemptRow, PipelineItemRow, PipelineNodeRow
from octipusd.store.pipeline_records import AttemptStatus, NodeStatus, PipelineAttempt, PipelineNode
from octipusd.store.pipeline_store import PipelineStoreMixin, attempt_record, lock_pipeline, node_record

__all__ = ["PipelineAttemptStoreMixin"]


class PipelineAttemptStoreMixin(PipelineStoreMixin):
    """A pipeline's graph nodes and stage attempts (beside the run's methods it extends); see the module."""

    # ------------------------------------------------------------------ nodes

    def set_pipeline_node(
        self,
        pipeline_id: str,
        key: str,
        status: NodeStatus,
        *,
        output: str | None = None,
        error: str | None = None,
        traversals: int | None = None,
        retries: int | None = None,
    ) -> PipelineNode:
        """Set a node's status (and its output, error, counters when given).

        Raises:
            NotFoundError: No such pipeline or node.
            StoreError: The database failed.
        """
        with self._tx(f"setting node {key} of pipeline {pipeline_id}", write=True) as db:
            lock_pipeline(db, pipeline_id)
            row = db.get(PipelineNodeRow, (pipeline_id, key))
            if row is None:
                raise NotFoundError(f"pipeline {pipeline_id} has no node {key}")
            row.status = status.value
            if output is not None:
                row.output = output
            row.error = error
            if traversals is not None:
                row.traversals = traversals
            if retries is not None:
                row.retries = retries
            row.updated_at = self._clock()
            db.add(row)
            return node_record(row)

    # ------------------------------------------------------------------ attempts

    def start_pipeline_attempt(
        self,
        pipeline_id: str,
        *,
        node_key: str,
        stage: str,
        item_id: str | None,
        start_reason: str,
        generation: int,
        step_id: int | None = None,
    ) -> PipelineAttempt:
        """Record a new stage attempt (``running``; its number one more than the node's and item's
        last) and the ``stage_started`` history event with item id and title, attempt id and number
        and the start reason; the node becomes ``running``.

        Raises:
            NotFoundError: No such pipeline or node.
            StoreError: The database failed.
        """
        with self._tx(f"starting a stage attempt of pipeline {pipeline_id}", write=True) as db:
            lock_pipeline(db, pipeline_id)
            node = db.get(PipelineNodeRow, (pipeline_id, node_key))
            if node is None:
                raise NotFoundError(f"pipeline {pipeline_id} has no node {node_key}")
            last = db.exec(
                select(func.max(PipelineAttemptRow.number))
                .where(col(PipelineAttemptRow.pipeline_id) == pipeline_id)
                .where(col(PipelineAttemptRow.node_key) == node_key)
                .where(
                    col(PipelineAttemptRow.item_id) == item_id
                    if item_id
                    else col(PipelineAttemptRow.item_id).is_(None)
                )
                .where(col(PipelineAttemptRow.stage) == stage)
            ).one()
            now = self._clock()
            row = PipelineAttemptRow(
                id=new_id(),
                pipeline_id=pipeline_id,
                node_key=node_key,
                stage=stage,
                item_id=item_id,
                number=(last or 0) + 1,
                start_reason=start_reason,
                status=AttemptStatus.RUNNING.value,
                generation=generation,
                step_id=step_id,
                started_at=now,
            )
            db.add(row)
            node.status, node.updated_at = NodeStatus.RUNNING.value, now
            db.add(node)
            item = db.get(PipelineItemRow, item_id) if item_id else None
            data = {
                "stage": stage,
                "node": node_key,
                "attemptNumber": row.number,
                "reason": start_reason,
                "itemTitle": item.title if item is not None else None,
            }
            self._append_event(db, pipeline_id, "stage_started", data, item_id=item_id, attempt_id=row.id)
            return attempt_record(row)

    def reopen_pipeline_attempt(self, attempt_id: str, *, reason: str) -> PipelineAttempt:
        """Continue an unfinished attempt (a resume after a stop, a failure or a restart): it is
        ``running`` again, its text so far kept; a ``stage_resumed`` event records why.

        Raises:
            NotFoundError: No such attempt.
            StoreError: The database failed.
        """
        with self._tx(f"resuming stage attempt {attempt_id}", write=True) as db:
            row = self._attempt_row(db, attempt_id)
            lock_pipeline(db, row.pipeline_id)
            row.status, row.ended_at = AttemptStatus.RUNNING.value, None
            db.add(row)
            data = {"stage": row.stage, "node": row.node_key, "attemptNumber": row.number, "reason": reason}
            self._append_event(
                db, row.pipeline_id, "stage_resumed", data, item_id=row.item_id, attempt_id=row.id
            )
            return attempt_record(row)

    def add_attempt_run(self, attempt_id: str, run_id: str) -> PipelineAttempt:
        """Record that the attempt's worker runs as ``run_id``.

        Raises:
            NotFoundError: No such attempt.
            StoreError: The database failed.
        """
        with self._tx(f"recording a run of stage attempt {attempt_id}", write=True) as db:
            row = self._attempt_row(db, attempt_id)
            runs = json.loads(row.run_ids)
            row.run_ids = json.dumps([*runs, run_id])
            db.add(row)
            return attempt_record(row)

    def save_incomplete_text(self, attempt_id: str, text: str) -> None:
        """Save an unfinished attempt's text so far (seed 003: every 15 s and when it fails).

        Raises:
            NotFoundError: No such attempt.
            StoreError: The database failed.
        """
        with self._tx(f"saving the text of stage attempt {attempt_id}", write=True) as db:
            row = self._attempt_row(db, attempt_id)
            row.incomplete_text = text
            db.add(row)

    def finish_pipeline_attempt(
        self,
        attempt_id: str,
        status: AttemptStatus,
        *,
        result: str | None = None,
        error: str | None = None,
        retry_reason: str | None = None,
        counters: dict[str, Any] | None = None,
        tokens: int = 0,
        keep_text: bool = False,
    ) -> PipelineAttempt:
        """End an attempt and record a ``stage_finished`` event. A finished attempt (``succeeded`` or
        ``failed``, or ``abandoned``) loses its INCOMPLETE text, unless ``keep_text`` (a worker that crashed: a resume
        continues the attempt); a ``stopped`` or ``interrupted`` one keeps it for its resume. Its
        tokens are added to the pipeline's pool.

        Raises:
            NotFoundError: No such attempt.
            StoreError: The database failed.
        """
        with self._tx(f"finishing stage attempt {attempt_id}", write=True) as db:
            row = self._attempt_row(db, attempt_id)
            pipeline = lock_pipeline(db, row.pipeline_id)
            row.status, row.ended_at = status.value, self._clock()
            row.result, row.error, row.retry_reason = result, error, retry_reason
            if counters is not None:
                row.counters = dump_object(counters, "counters")
            row.tokens += tokens
            if (
                status in (AttemptStatus.SUCCEEDED, AttemptStatus.FAILED, AttemptStatus.ABANDONED)
                and not keep_text
            ):
                row.incomplete_text = None
            db.add(row)
            pipeline.tokens_used += tokens
            db.add(pipeline)
            data = {
                "stage": row.stage,
                "node": row.node_key,
                "attemptNumber": row.number,
                "status": status.value,
                "error": error,
                "retryReason": retry_reason,
            }
            self._append_event(
                db, row.pipeline_id, "stage_finished", data, item_id=row.item_id, attempt_id=row.id
            )
            return attempt_record(row)

    @staticmethod
    def _attempt_row(db: DbSession, attempt_id: str) -> PipelineAttemptRow:
        row = db.get(PipelineAttemptRow, attempt_id)
        if row is None:
            raise NotFoundError(f"stage attempt {attempt_id} not found")
        return row
