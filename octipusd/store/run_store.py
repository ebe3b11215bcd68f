"""Store methods for runs (turns) (mixed into :class:`Store`; their events: ``event_store.py``).

A run's turn index is allocated under a lock on the session row, so concurrent callers get
distinct, gap-free values; the first terminal
status of a run wins and cancels its pending approvals in the same transaction. Same conventions
as ``repository.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import func, select as core_select, update
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError
from octipusd.store.codec import StoreMixin, check_limit, enum_member, new_id
from octipusd.store.models import RunRow
from octipusd.store.records import ApprovalStatus, Run, RunStatus, StageTag, UsageTotals
from octipusd.store.usage_store import usage_columns, usage_totals_of

__all__ = ["RUN_ACCOUNTING_FIELDS", "RUN_UPDATABLE_FIELDS", "RunStoreMixin"]

#: Run columns :meth:`RunStoreMixin.update_run` may change.
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

#: Run columns :meth:`RunStoreMixin.finish_run` may write as the last invocation's accounting.
RUN_ACCOUNTING_FIELDS: frozenset[str] = frozenset(
    {
        "exit_code",
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "usage_estimated",
        "cost_usd",
        "result_text",
    }
)

#: Most child runs whose receipt mentions a worktree id are read to find the one it names (runs).
CHILD_RECEIPT_SCAN = 50

_TERMINAL_RUN_VALUES = tuple(s.value for s in RunStatus if s.terminal)
_LIVE_RUN_VALUES = tuple(s.value for s in RunStatus if not s.terminal)


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
        receipt=json.loads(row.receipt) if row.receipt else None,
        host_services=row.host_services,
        pipeline_id=row.pipeline_id,
        pipeline_attempt_id=row.pipeline_attempt_id,
        stage=row.stage,
        item_id=row.item_id,
    )


class RunStoreMixin(StoreMixin):
    """Runs (create, read, list, update, finish, interrupt orphans); see the module docstring."""

    @staticmethod
    def _lock_run(db: DbSession, run_id: str) -> RunRow:
        row = db.exec(select(RunRow).where(col(RunRow.id) == run_id).with_for_update(key_share=True)).first()
        if row is None:
            raise NotFoundError(f"run {run_id} not found")
        return row

    @staticmethod
    def _run_of_session(db: DbSession, run_id: str, session_id: str, what: str = "run") -> RunRow:
        """The run ``run_id``, which must belong to ``session_id``.

        Raises:
            NotFoundError: No such run.
            InvalidRequestError: It is a run of another session.
        """
        run = db.get(RunRow, run_id)
        if run is None:
            raise NotFoundError(f"{what} {run_id} not found")
        if run.session_id != session_id:
            raise InvalidRequestError(
                f"{what} {run_id} belongs to session {run.session_id}, not {session_id}"
            )
        return run

    @staticmethod
    def _get_run_row(db: DbSession, run_id: str) -> RunRow:
        row = db.get(RunRow, run_id)
        if row is None:
            raise NotFoundError(f"run {run_id} not found")
        return row

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
        host_services: bool = False,
        stage: StageTag | None = None,
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
            host_services: The run's own shell commands share the host's services under the
                shell sandbox (a root turn's choice; children never inherit it).
            stage: For a pipeline stage worker's run, the pipeline, attempt, stage and item it
                works for (stored on the run's row); None otherwise.

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
                self._run_of_session(db, parent_run_id, session_id, "parent run")
            highest = db.exec(
                select(func.max(RunRow.turn_index)).where(col(RunRow.session_id) == session_id)
            ).one()
            now = self._clock()
            row = RunRow(
                id=new_id(),
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
                host_services=host_services,
                pipeline_id=stage.pipeline_id if stage is not None else None,
                pipeline_attempt_id=stage.attempt_id if stage is not None else None,
                stage=stage.stage if stage is not None else None,
                item_id=stage.item_id if stage is not None else None,
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
            InvalidRequestError: An unknown status, or ``limit`` < 1.
            StoreError: The database failed.
        """
        check_limit(limit)
        query = select(RunRow)
        if session_id is not None:
            query = query.where(col(RunRow.session_id) == session_id)
        if statuses is not None:
            query = query.where(
                col(RunRow.status).in_([enum_member(RunStatus, s, "run status").value for s in statuses])
            )
        query = query.order_by(col(RunRow.created_at).desc(), col(RunRow.turn_index).desc()).limit(limit)
        with self._tx("listing runs") as db:
            return [_run(r) for r in db.exec(query).all()]

    def usage_totals(
        self,
        session_id: str,
        *,
        vendor_session_id: str | None = None,
        exclude_run_id: str | None = None,
    ) -> UsageTotals:
        """Sum what a session's runs used, in one aggregate query over all of them.

        Args:
            session_id: The session (an unknown id gives zero runs).
            vendor_session_id: Only runs in this vendor session (a vendor thread's usage so far).
            exclude_run_id: Leave this run out (the run asking).

        Raises:
            StoreError: The database failed.
        """
        query = core_select(*usage_columns()).where(col(RunRow.session_id) == session_id)
        if vendor_session_id is not None:
            query = query.where(col(RunRow.vendor_session_id) == vendor_session_id)
        if exclude_run_id is not None:
            query = query.where(col(RunRow.id) != exclude_run_id)
        with self._core("summing a session's usage", single=True) as conn:
            return usage_totals_of(conn.execute(query).one())

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

    def set_run_receipt(self, run_id: str, receipt: Mapping[str, Any]) -> Run:
        """Store a child run's receipt (a JSON object; it replaces any earlier one).

        Raises:
            NotFoundError: No such run.
            StoreError: The database failed.
        """
        text = json.dumps(dict(receipt), sort_keys=True, separators=(",", ":"))
        with self._tx(f"storing the receipt of run {run_id}", write=True) as db:
            row = self._get_run_row(db, run_id)
            row.receipt = text
            db.add(row)
            db.flush()
            return _run(row)

    def list_children(self, run_id: str) -> list[Run]:
        """The child runs ``run_id`` spawned, oldest first (contract retries included).

        Raises:
            NotFoundError: No such run.
            StoreError: The database failed.
        """
        with self._tx(f"listing the children of run {run_id}") as db:
            self._get_run_row(db, run_id)
            rows = db.exec(
                select(RunRow).where(col(RunRow.parent_run_id) == run_id).order_by(col(RunRow.turn_index))
            ).all()
            return [_run(row) for row in rows]

    def child_of_worktree(self, worktree_id: str) -> Run | None:
        """The newest child run whose receipt names worktree ``worktree_id`` (None: none does).

        Raises:
            StoreError: The database failed.
        """
        pattern = f"%{worktree_id}%"  # a prefilter; the receipt's own field decides
        query = (
            select(RunRow)
            .where(col(RunRow.parent_run_id).is_not(None), col(RunRow.receipt).like(pattern))
            .order_by(col(RunRow.created_at).desc())
            .limit(CHILD_RECEIPT_SCAN)
        )
        with self._tx(f"finding the child run of worktree {worktree_id}") as db:
            for row in db.exec(query).all():
                run = _run(row)
                worktree = (run.receipt or {}).get("worktree")
                if isinstance(worktree, dict) and worktree.get("id") == worktree_id:
                    return run
        return None

    def finish_run(
        self,
        run_id: str,
        *,
        status: RunStatus | str,
        reason: str | None = None,
        exit_code: int | None = None,
        result_text: str | None = None,
        accounting: Mapping[str, Any] | None = None,
        approvals_reason: str | None = None,
    ) -> Run:
        """End a run with a terminal status; the first terminal status wins.

        Sets ``ended_at`` to now, and cancels the run's pending approvals in the same
        transaction. If the run is already terminal nothing changes but ``accounting``, and it is
        returned. ``reason``, ``exit_code`` and ``result_text`` are written only when given.

        Args:
            run_id: The run.
            status: ``succeeded``, ``failed``, ``interrupted`` or ``cancelled``.
            reason: Why it failed / was interrupted / cancelled.
            exit_code: Exit code of the vendor CLI.
            result_text: Final answer text.
            accounting: What the run's last vendor invocation used and gave (names from
                :data:`RUN_ACCOUNTING_FIELDS`), written in the same transaction as
                :meth:`update_run` would, whether or not the run had ended already: the end of a
                turn is one commit.
            approvals_reason: The ``decision_reason`` of the pending approvals the first terminal
                status cancels (default ``run <status>``). An ended run has none: no approval is
                created for it.

        Returns:
            The run after the call (unchanged when it had already ended).

        Raises:
            ValueError: ``status`` is not a terminal status, or ``accounting`` names another field.
            NotFoundError: No such run.
            StoreError: The database failed.
        """
        final = RunStatus(status)
        if not final.terminal:
            raise ValueError(f"finish_run needs a terminal status, got {final.value!r}")
        extra = sorted(set(accounting or {}) - RUN_ACCOUNTING_FIELDS)
        if extra:
            raise ValueError(f"finish_run cannot account {', '.join(extra)}")
        values: dict[str, Any] = {"status": final.value, "ended_at": self._clock()}
        if reason is not None:
            values["reason"] = reason
        if exit_code is not None:
            values["exit_code"] = exit_code
        if result_text is not None:
            values["result_text"] = result_text
        with self._tx(f"finishing run {run_id}", write=True) as db:
            if accounting:
                db.exec(
                    update(RunRow)
                    .where(col(RunRow.id) == run_id)
                    .values(**accounting)
                    .execution_options(synchronize_session=False)
                )
            result = db.exec(
                update(RunRow)
                .where(col(RunRow.id) == run_id, col(RunRow.status).not_in(_TERMINAL_RUN_VALUES))
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount:
                self._resolve_pending_for_runs(
                    db,
                    [run_id],
                    ApprovalStatus.CANCELLED,
                    approvals_reason or f"run {final.value}",
                    values["ended_at"],
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
