"""Store methods for pipeline runs: the run, its graph nodes, attempts and history (mixed into :class:`Store`).

Seed 003 "Executable paths and pipeline recovery", FACTS.md §6. The durable engine keeps where a
pipeline's workflow is; this is its public record, written by the workflow's steps and served to
status reads. Plan items and their queued edits are in ``pipeline_item_store.py``, graph nodes and
stage attempts in ``pipeline_attempt_store.py``.

Concurrency: every write locks the pipeline's row first (``SELECT ... FOR UPDATE`` on PostgreSQL;
SQLite's writes are serialised by the store's write lock), so one pipeline's writes never
interleave; history sequence numbers are allocated under that lock. "Exactly once" changes (a
resume claiming a stopped pipeline) are conditional on the status read under the lock: two
concurrent resumes never both succeed.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError
from octipusd.store.codec import StoreMixin, check_limit, dump_object, load_object, new_id
from octipusd.store.models import (
    PipelineAttemptRow,
    PipelineEventRow,
    PipelineItemRow,
    PipelineNodeRow,
    PipelineRow,
)
from octipusd.store.pipeline_records import (
    ALLOWANCE_KEYS,
    DECISION_EVENT_KINDS,
    AttemptStatus,
    ItemStatus,
    MetadataPatch,
    NodeStatus,
    Pipeline,
    PipelineAttempt,
    PipelineEvent,
    PipelineItem,
    PipelineNode,
    PipelineStatus,
)

__all__ = [
    "INTERRUPTED_SUMMARY",
    "PipelineSnapshot",
    "PipelineStoreMixin",
    "attempt_record",
    "item_record",
    "lock_pipeline",
    "node_record",
]

#: The summary a restart leaves on a pipeline it paused (FACTS.md §6 ``reconcileInterrupted``).
INTERRUPTED_SUMMARY = "interrupted: the daemon stopped while it ran; resume it to continue"
#: Pipeline fields :meth:`PipelineStoreMixin.update_pipeline` may set.
_UPDATABLE = frozenset({"summary", "error", "current_node", "current_item_id", "workflow_id", "plan"})
_TERMINAL = frozenset({PipelineStatus.COMPLETED, PipelineStatus.FAILED, PipelineStatus.STOPPED})


@dataclass(frozen=True)
class PipelineSnapshot:
    """One consistent read of a pipeline: the run, its items (by ordinal), nodes (by key), attempts
    (oldest first) and history (by seq; only the decisions unless the whole history was asked for)."""

    pipeline: Pipeline
    items: list[PipelineItem]
    nodes: list[PipelineNode]
    attempts: list[PipelineAttempt]
    events: list[PipelineEvent]


def _pipeline(row: PipelineRow) -> Pipeline:
    changes = json.loads(row.pending_changes)
    return Pipeline(
        id=row.id,
        session_id=row.session_id,
        user=row.user,
        workspace=row.workspace,
        name=row.name,
        template_id=row.template_id,
        template=load_object(row.template),
        params=load_object(row.params),
        graph=load_object(row.graph),
        status=PipelineStatus(row.status),
        summary=row.summary,
        error=row.error,
        plan=load_object(row.plan) if row.plan is not None else None,
        metadata=load_object(row.metadata_),
        pending_changes=[c for c in changes if isinstance(c, dict)] if isinstance(changes, list) else [],
        tokens_used=row.tokens_used,
        generation=row.generation,
        workflow_id=row.workflow_id,
        current_node=row.current_node,
        current_item_id=row.current_item_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
        ended_at=row.ended_at,
    )


def item_record(row: PipelineItemRow) -> PipelineItem:
    """The frozen record of an item row."""
    return PipelineItem(
        id=row.id,
        pipeline_id=row.pipeline_id,
        ordinal=row.ordinal,
        title=row.title,
        detail=row.detail,
        acceptance=row.acceptance,
        status=ItemStatus(row.status),
        created_by_node_key=row.created_by_node_key,
        created_by_user=row.created_by_user,
        result=row.result,
        error=row.error,
        evidence=row.evidence,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def node_record(row: PipelineNodeRow) -> PipelineNode:
    """The frozen record of a node row."""
    return PipelineNode(
        pipeline_id=row.pipeline_id,
        key=row.key,
        kind=row.kind,
        status=NodeStatus(row.status),
        traversals=row.traversals,
        retries=row.retries,
        output=row.output,
        error=row.error,
        updated_at=row.updated_at,
    )


def attempt_record(row: PipelineAttemptRow) -> PipelineAttempt:
    """The frozen record of an attempt row."""
    runs = json.loads(row.run_ids)
    return PipelineAttempt(
        id=row.id,
        pipeline_id=row.pipeline_id,
        node_key=row.node_key,
        stage=row.stage,
        item_id=row.item_id,
        number=row.number,
        start_reason=row.start_reason,
        status=AttemptStatus(row.status),
        run_ids=[str(r) for r in runs] if isinstance(runs, list) else [],
        incomplete_text=row.incomplete_text,
        result=row.result,
        error=row.error,
        retry_reason=row.retry_reason,
        counters=load_object(row.counters) if row.counters is not None else None,
        tokens=row.tokens,
        step_id=row.step_id,
        generation=row.generation,
        started_at=row.started_at,
        ended_at=row.ended_at,
    )


def _event(row: PipelineEventRow) -> PipelineEvent:
    return PipelineEvent(
        pipeline_id=row.pipeline_id,
        seq=row.seq,
        kind=row.kind,
        item_id=row.item_id,
        attempt_id=row.attempt_id,
        data=load_object(row.data),
        created_at=row.created_at,
    )


def lock_pipeline(db: DbSession, pipeline_id: str) -> PipelineRow:
    """The pipeline's row, locked for this transaction (PostgreSQL ``FOR UPDATE``).

    Raises:
        NotFoundError: No such pipeline.
    """
    row = db.exec(select(PipelineRow).where(col(PipelineRow.id) == pipeline_id).with_for_update()).first()
    if row is None:
        raise NotFoundError(f"pipeline {pipeline_id} not found")
    return row


class PipelineStoreMixin(StoreMixin):
    """Pipeline runs, nodes, attempts and history; see the module docstring."""

    # ------------------------------------------------------------------ the run

    def create_pipeline(
        self,
        *,
        session_id: str,
        user: str,
        workspace: str,
        name: str,
        template_id: str | None,
        template: dict[str, Any],
        params: dict[str, Any],
        graph: dict[str, Any],
        nodes: Sequence[tuple[str, str]],
        plan: dict[str, Any] | None = None,
        status: PipelineStatus = PipelineStatus.PLANNING,
        metadata: dict[str, Any] | None = None,
        pipeline_id: str | None = None,
        workflow_id: str | None = None,
    ) -> Pipeline:
        """Store a new pipeline with its nodes (all ``pending``) and its first history event
        (``created``): the graph and initial checkpoint, in one transaction.

        Args:
            nodes: ``(key, kind)`` of every graph node.
            metadata: Its JSON state to start with (the walker's ``description``...).
            pipeline_id: Its id (32 hex characters) when the caller chose it; else a new one.
            workflow_id: The engine's id of its first walk, when known.

        Raises:
            InvalidRequestError: A JSON field is not a JSON object.
            NotFoundError: No such session.
            StoreError: The database failed.
        """
        now = self._clock()
        row = PipelineRow(
            id=pipeline_id or new_id(),
            session_id=session_id,
            user=user,
            workspace=workspace,
            name=name,
            template_id=template_id,
            template=dump_object(template, "template"),
            params=dump_object(params, "params"),
            graph=dump_object(graph, "graph"),
            status=status.value,
            plan=dump_object(plan, "plan") if plan is not None else None,
            workflow_id=workflow_id,
            metadata_=dump_object(metadata or {}, "metadata"),
            created_at=now,
            updated_at=now,
        )
        with self._tx(f"creating a pipeline in session {session_id}", write=True) as db:
            self._lock_session(db, session_id)
            db.add(row)
            db.flush()
            for key, kind in nodes:
                db.add(
                    PipelineNodeRow(
                        pipeline_id=row.id,
                        key=key,
                        kind=kind,
                        status=NodeStatus.PENDING.value,
                        updated_at=now,
                    )
                )
            self._append_event(db, row.id, "created", {"name": name, "nodes": len(nodes)})
        return _pipeline(row)

    def get_pipeline(self, pipeline_id: str) -> Pipeline:
        """The pipeline ``pipeline_id``.

        Raises:
            NotFoundError: No such pipeline.
            StoreError: The database failed.
        """
        with self._tx(f"reading pipeline {pipeline_id}") as db:
            row = db.get(PipelineRow, pipeline_id)
            if row is None:
                raise NotFoundError(f"pipeline {pipeline_id} not found")
            return _pipeline(row)

    def list_pipelines(
        self,
        *,
        user: str | None = None,
        session_id: str | None = None,
        statuses: Collection[PipelineStatus] | None = None,
        limit: int = 100,
    ) -> list[Pipeline]:
        """Pipelines, newest first, filtered by equality on the given fields.

        Raises:
            InvalidRequestError: ``limit`` below 1.
            StoreError: The database failed.
        """
        check_limit(limit)
        query = select(PipelineRow)
        if user is not None:
            query = query.where(col(PipelineRow.user) == user)
        if session_id is not None:
            query = query.where(col(PipelineRow.session_id) == session_id)
        if statuses is not None:
            query = query.where(col(PipelineRow.status).in_([s.value for s in statuses]))
        query = query.order_by(col(PipelineRow.created_at).desc(), col(PipelineRow.id)).limit(limit)
        with self._tx("listing pipelines") as db:
            return [_pipeline(r) for r in db.exec(query)]

    def has_open_pipelines(self) -> bool:
        """True when a pipeline is not finished (not completed or failed): the engine must run.

        Raises:
            StoreError: The database failed.
        """
        done = [PipelineStatus.COMPLETED.value, PipelineStatus.FAILED.value]
        with self._tx("looking for open pipelines") as db:
            found = db.exec(
                select(PipelineRow.id).where(col(PipelineRow.status).not_in(done)).limit(1)
            ).first()
            return found is not None

    def pipeline_snapshot(self, pipeline_id: str, *, history: bool = True) -> PipelineSnapshot:
        """The pipeline, its items, nodes, attempts and events, from one read: every event with
        ``history``, else only the decisions (:data:`DECISION_EVENT_KINDS`: each item lists its own).

        Raises:
            NotFoundError: No such pipeline.
            StoreError: The database failed.
        """
        with self._tx(f"reading the status of pipeline {pipeline_id}") as db:
            row = db.get(PipelineRow, pipeline_id)
            if row is None:
                raise NotFoundError(f"pipeline {pipeline_id} not found")
            items = db.exec(
                select(PipelineItemRow)
                .where(col(PipelineItemRow.pipeline_id) == pipeline_id)
                .order_by(col(PipelineItemRow.ordinal), col(PipelineItemRow.created_at))
            )
            nodes = db.exec(
                select(PipelineNodeRow).where(col(PipelineNodeRow.pipeline_id) == pipeline_id)
            ).all()
            attempts = db.exec(
                select(PipelineAttemptRow)
                .where(col(PipelineAttemptRow.pipeline_id) == pipeline_id)
                .order_by(col(PipelineAttemptRow.started_at), col(PipelineAttemptRow.id))
            )
            found = select(PipelineEventRow).where(col(PipelineEventRow.pipeline_id) == pipeline_id)
            if not history:
                found = found.where(col(PipelineEventRow.kind).in_(sorted(DECISION_EVENT_KINDS)))
            events = db.exec(found.order_by(col(PipelineEventRow.seq))).all()
            return PipelineSnapshot(
                pipeline=_pipeline(row),
                items=[item_record(i) for i in items],
                nodes=sorted((node_record(n) for n in nodes), key=lambda n: _node_order(n.key)),
                attempts=[attempt_record(a) for a in attempts],
                events=[_event(e) for e in events],
            )

    def set_pipeline_status(
        self,
        pipeline_id: str,
        status: PipelineStatus,
        *,
        expect: Collection[PipelineStatus] | None = None,
        generation: int | None = None,
        event: Mapping[str, Any] | None = None,
        metadata: MetadataPatch | None = None,
        **fields: Any,
    ) -> Pipeline:
        """Set the pipeline's status (and ``fields``: see :data:`_UPDATABLE`; ``metadata`` patched as
        the row is, under its lock), recording a ``status`` history event with ``event``'s data, only
        if its status is in ``expect`` (and its walk is ``generation``, when given).

        A move to ``completed``, ``failed`` or ``stopped`` stamps ``ended_at`` and drops the
        allowances (:data:`ALLOWANCE_KEYS`); any other clears ``ended_at``.

        Raises:
            InvalidRequestError: A field that is not updatable.
            ConflictError: Its status is not in ``expect`` (the message names the status), or its
                walk is not ``generation``.
            NotFoundError: No such pipeline.
            StoreError: The database failed.
        """
        with self._tx(f"setting pipeline {pipeline_id} {status.value}", write=True) as db:
            row = lock_pipeline(db, pipeline_id)
            current = PipelineStatus(row.status)
            if expect is not None and current not in expect:
                raise ConflictError(
                    f"pipeline {pipeline_id} is {current.value}, not {' or '.join(s.value for s in expect)}"
                )
            if generation is not None and row.generation != generation:
                raise ConflictError(
                    f"pipeline {pipeline_id} walks generation {row.generation}, not {generation}"
                )
            self._set_fields(row, fields)
            if status in _TERMINAL:  # seed 003: an allowance ends with the run
                _patch_metadata(row, _ending_allowances(metadata))
            else:
                _patch_metadata(row, metadata)
            row.status = status.value
            row.ended_at = self._clock() if status in _TERMINAL else None
            row.updated_at = self._clock()
            db.add(row)
            data = {"from": current.value, "to": status.value, **(event or {})}
            self._append_event(db, pipeline_id, "status", data, item_id=row.current_item_id)
            return _pipeline(row)

    def claim_pipeline_walk(
        self,
        pipeline_id: str,
        *,
        expect: Collection[PipelineStatus],
        workflow_id: str,
        metadata: MetadataPatch | None = None,
    ) -> Pipeline:
        """Start a new walk of the pipeline: from a status in ``expect`` to ``running``, its
        ``generation`` one more, ``workflow_id`` set and ``metadata`` patched (the replay review it
        no longer awaits dropped), in one locked step (two concurrent resumes: one wins, the other is
        refused; nobody sees it ``running`` with a review still pending).

        Raises:
            ConflictError: Its status is not in ``expect`` (running already, or a second resume).
            NotFoundError: No such pipeline.
            StoreError: The database failed.
        """
        with self._tx(f"starting a walk of pipeline {pipeline_id}", write=True) as db:
            row = lock_pipeline(db, pipeline_id)
            current = PipelineStatus(row.status)
            if current not in expect:
                raise ConflictError(
                    f"pipeline {pipeline_id} is {current.value}: it cannot be resumed now"
                    + ("; wait for it to stop or stop it first" if current.active else "")
                )
            row.status = PipelineStatus.RUNNING.value
            row.generation += 1
            row.workflow_id = workflow_id
            _patch_metadata(row, metadata)
            row.error = None
            row.ended_at = None
            row.updated_at = self._clock()
            db.add(row)
            data = {
                "from": current.value,
                "to": row.status,
                "generation": row.generation,
                "workflow": workflow_id,
            }
            self._append_event(db, pipeline_id, "walk", data)
            return _pipeline(row)

    def update_pipeline(
        self,
        pipeline_id: str,
        *,
        add_tokens: int = 0,
        metadata: MetadataPatch | None = None,
        **fields: Any,
    ) -> Pipeline:
        """Set fields of the pipeline (:data:`_UPDATABLE`), patch its ``metadata`` (applied to the row
        as it is, under its lock) and add ``add_tokens`` to its pool.

        Raises:
            InvalidRequestError: A field that is not updatable.
            NotFoundError: No such pipeline.
            StoreError: The database failed.
        """
        with self._tx(f"updating pipeline {pipeline_id}", write=True) as db:
            row = lock_pipeline(db, pipeline_id)
            self._set_fields(row, fields)
            _patch_metadata(row, metadata)
            row.tokens_used += add_tokens
            row.updated_at = self._clock()
            db.add(row)
            return _pipeline(row)

    @staticmethod
    def _set_fields(row: PipelineRow, fields: Mapping[str, Any]) -> None:
        unknown = set(fields) - _UPDATABLE
        if unknown:
            raise InvalidRequestError(f"not updatable pipeline fields: {sorted(unknown)}")
        for name, value in fields.items():
            if name == "plan":
                row.plan = dump_object(value, "plan") if value is not None else None
            else:
                setattr(row, name, value)

    def reconcile_interrupted_pipelines(self) -> list[str]:
        """After a restart: pipelines left ``planning``, ``running`` or ``awaiting_approval`` become
        ``paused`` with :data:`INTERRUPTED_SUMMARY`, their ``running``/``awaiting_approval`` nodes
        ``pending`` and their ``running`` attempts ``interrupted`` (the text so far kept). Completed,
        failed, stopped and paused pipelines are untouched, and so is one whose resume awaits its
        replay review (no walk was at work; the review stays open); running it twice changes nothing.

        Returns:
            The ids of the pipelines it paused.

        Raises:
            StoreError: The database failed.
        """
        active = [s.value for s in PipelineStatus if s.active]
        with self._tx("pausing interrupted pipelines", write=True) as db:
            rows = db.exec(
                select(PipelineRow).where(col(PipelineRow.status).in_(active)).with_for_update()
            ).all()
            now = self._clock()
            rows = [r for r in rows if not _pipeline(r).awaiting_replay_review]  # it waits for a person
            for row in rows:
                previous = row.status
                row.status, row.summary, row.updated_at = (
                    PipelineStatus.PAUSED.value,
                    INTERRUPTED_SUMMARY,
                    now,
                )
                db.add(row)
                self._pause_nodes(db, row.id, now)
                self._append_event(
                    db, row.id, "status", {"from": previous, "to": row.status, "reason": "interrupted"}
                )
            return [r.id for r in rows]

    @staticmethod
    def _pause_nodes(db: DbSession, pipeline_id: str, now: Any) -> None:
        busy = [NodeStatus.RUNNING.value, NodeStatus.AWAITING_APPROVAL.value]
        for node in db.exec(
            select(PipelineNodeRow)
            .where(col(PipelineNodeRow.pipeline_id) == pipeline_id)
            .where(col(PipelineNodeRow.status).in_(busy))
        ):
            node.status, node.updated_at = NodeStatus.PENDING.value, now
            db.add(node)
        for attempt in db.exec(
            select(PipelineAttemptRow)
            .where(col(PipelineAttemptRow.pipeline_id) == pipeline_id)
            .where(col(PipelineAttemptRow.status) == AttemptStatus.RUNNING.value)
        ):
            attempt.status, attempt.ended_at = AttemptStatus.INTERRUPTED.value, now
            db.add(attempt)

    # ------------------------------------------------------------------ history

    def append_pipeline_event(
        self,
        pipeline_id: str,
        kind: str,
        data: dict[str, Any],
        *,
        item_id: str | None = None,
        attempt_id: str | None = None,
    ) -> PipelineEvent:
        """Append one durable history event.

        Raises:
            InvalidRequestError: ``data`` is not a JSON object.
            NotFoundError: No such pipeline.
            StoreError: The database failed.
        """
        with self._tx(f"recording a {kind} event of pipeline {pipeline_id}", write=True) as db:
            lock_pipeline(db, pipeline_id)
            return _event(
                self._append_event(db, pipeline_id, kind, data, item_id=item_id, attempt_id=attempt_id)
            )

    def pipeline_events(self, pipeline_id: str, *, after: int = 0, limit: int = 1000) -> list[PipelineEvent]:
        """History events of a pipeline with ``seq`` above ``after``, oldest first.

        Raises:
            InvalidRequestError: ``limit`` below 1.
            StoreError: The database failed.
        """
        check_limit(limit)
        with self._tx(f"reading the history of pipeline {pipeline_id}") as db:
            rows = db.exec(
                select(PipelineEventRow)
                .where(col(PipelineEventRow.pipeline_id) == pipeline_id)
                .where(col(PipelineEventRow.seq) > after)
                .order_by(col(PipelineEventRow.seq))
                .limit(limit)
            )
            return [_event(r) for r in rows]

    def _append_event(
        self,
        db: DbSession,
        pipeline_id: str,
        kind: str,
        data: Mapping[str, Any],
        *,
        item_id: str | None = None,
        attempt_id: str | None = None,
    ) -> PipelineEventRow:
        """Add one event in ``db``'s transaction; the caller holds the pipeline's lock."""
        last = db.exec(
            select(func.max(PipelineEventRow.seq)).where(col(PipelineEventRow.pipeline_id) == pipeline_id)
        ).one()
        row = PipelineEventRow(
            pipeline_id=pipeline_id,
            seq=(last or 0) + 1,
            kind=kind,
            item_id=item_id,
            attempt_id=attempt_id,
            data=dump_object(dict(data), f"{kind} event"),
            created_at=self._clock(),
        )
        db.add(row)
        db.flush()
        return row


def _patch_metadata(row: PipelineRow, patch: MetadataPatch | None) -> None:
    """Apply ``patch`` to the locked ``row``'s ``metadata`` as it is now (nothing for None)."""
    if patch is not None:
        row.metadata_ = dump_object(patch.applied(load_object(row.metadata_)), "metadata")


def _ending_allowances(patch: MetadataPatch | None) -> MetadataPatch:
    """``patch`` also dropping what people approved ahead (:data:`ALLOWANCE_KEYS`): it ends when the
    pipeline is ``completed``, ``failed`` or ``stopped``. The blocked call still open to approve is
    kept (its question stays open for the resume; approved while the pipeline rests, it allows
    nothing)."""
    patch = patch or MetadataPatch()
    put = {k: v for k, v in patch.put.items() if k not in ALLOWANCE_KEYS}
    return MetadataPatch(put=put, drop=patch.drop | ALLOWANCE_KEYS)


def _node_order(key: str) -> tuple[int, str]:
    """``n2`` before ``n10``."""
    digits = key[1:]
    return (int(digits), key) if digits.isdigit() else (1 << 30, key)
