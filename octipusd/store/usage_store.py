"""Store methods for usage and cost summed per run, per session or per model row (mixed into
:class:`~octipusd.store.Store`; one session's totals: ``run_store.py usage_totals``).

Every figure is summed by the database in one ``GROUP BY`` query (the same aggregates as a
session's totals, :func:`usage_columns`), on SQLite and PostgreSQL alike. Same conventions as
``repository.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import case, func, select as core_select
from sqlmodel import col

from octipusd.store.codec import StoreMixin, check_limit, enum_member
from octipusd.store.models import ModelRowRow, RunRow, SessionRow
from octipusd.store.records import UsageTotals

__all__ = ["MAX_USAGE_GROUPS", "UsageBy", "UsageGroup", "UsageStoreMixin", "usage_columns", "usage_totals_of"]

#: Most groups (runs, sessions or model rows) one usage report lists.
MAX_USAGE_GROUPS: Final = 1000


class UsageBy(StrEnum):
    """What a usage report groups runs by."""

    RUN = "run"
    SESSION = "session"
    MODEL_ROW = "model_row"


@dataclass(frozen=True, slots=True)
class UsageGroup:
    """The usage of one group of runs.

    Attributes:
        key: The run id, session id or model row id (None: sessions created without a model row).
        name: The session's title (by run or session) or the model row's name (None: none).
        session_id: The session (by run or session; None by model row).
        adapter: The sessions' adapter.
        model: The sessions' model (None: the vendor's default).
        last_run_at: When the group's newest run was created.
        totals: What its runs used.
    """

    key: str | None
    name: str | None
    session_id: str | None
    adapter: str
    model: str | None
    last_run_at: datetime
    totals: UsageTotals


def usage_columns() -> list[Any]:
    """The aggregates of a usage sum over ``runs`` (in :func:`usage_totals_of`'s order)."""
    cost = col(RunRow.cost_usd)
    return [
        func.count(),
        func.coalesce(func.sum(col(RunRow.input_tokens)), 0),
        func.coalesce(func.sum(col(RunRow.output_tokens)), 0),
        func.coalesce(func.sum(col(RunRow.cache_creation_input_tokens)), 0),
        func.coalesce(func.sum(col(RunRow.cache_read_input_tokens)), 0),
        func.sum(cost),
        func.count() - func.count(cost),
        func.coalesce(func.max(case((col(RunRow.usage_estimated), 1), else_=0)), 0),
    ]


def usage_totals_of(row: Sequence[Any]) -> UsageTotals:
    """The :class:`UsageTotals` of a result row holding :func:`usage_columns` (in that order)."""
    return UsageTotals(
        runs=int(row[0]),
        input_tokens=int(row[1]),
        output_tokens=int(row[2]),
        cache_creation_input_tokens=int(row[3]),
        cache_read_input_tokens=int(row[4]),
        cost_usd=row[5],  # an exact amount: the column's type reads the sum of nano-dollars
        runs_without_cost=int(row[6]),
        estimated=bool(row[7]),
    )


def _keys(by: UsageBy) -> list[Any]:
    """The grouping columns: key, name, session id, adapter, model."""
    adapter, model = col(SessionRow.adapter), col(SessionRow.model)
    if by is UsageBy.RUN:
        return [col(RunRow.id), col(SessionRow.title), col(RunRow.session_id), adapter, model]
    if by is UsageBy.SESSION:
        return [col(RunRow.session_id), col(SessionRow.title), col(RunRow.session_id), adapter, model]
    return [col(SessionRow.model_row_id), col(ModelRowRow.name), adapter, model]


class UsageStoreMixin(StoreMixin):
    """Usage per run, session or model row; see the module docstring."""

    def usage_by(self, by: UsageBy | str, *, limit: int = 100) -> list[UsageGroup]:
        """Sum every run's usage per run, per session or per model row, newest group first.

        By model row, sessions are grouped by their model row and by their adapter and model
        (a row edited after some sessions were created from it shows one group per model it
        had; sessions created without a row are grouped by adapter and model, key None).

        Args:
            by: ``run``, ``session`` or ``model_row``.
            limit: Most groups returned (1 to :data:`MAX_USAGE_GROUPS`); the newest are kept.

        Raises:
            InvalidRequestError: An unknown ``by`` or a limit out of range.
            StoreError: The database failed.
        """
        grouping = enum_member(UsageBy, by, "usage grouping")
        check_limit(limit)
        limit = min(limit, MAX_USAGE_GROUPS)
        keys = _keys(grouping)
        last = func.max(col(RunRow.created_at))
        query = core_select(*keys, last, *usage_columns()).select_from(
            sa.join(RunRow, SessionRow, col(RunRow.session_id) == col(SessionRow.id))
        )
        if grouping is UsageBy.MODEL_ROW:
            query = query.outerjoin(ModelRowRow, col(ModelRowRow.id) == col(SessionRow.model_row_id))
        query = query.group_by(*keys).order_by(last.desc(), keys[0]).limit(limit)
        with self._core(f"summing usage by {grouping.value}", single=True) as conn:
            rows = conn.execute(query).all()
        groups = []
        for row in rows:
            if grouping is UsageBy.MODEL_ROW:
                key, name, adapter, model, *rest = row
                session_id = None
            else:
                key, name, session_id, adapter, model, *rest = row
            groups.append(
                UsageGroup(
                    key=key,
                    name=name,
                    session_id=session_id,
                    adapter=adapter,
                    model=model,
                    last_run_at=rest[0],
                    totals=usage_totals_of(rest[1:]),
                )
            )
        return groups

    def usage_total(self) -> UsageTotals:
        """Every run's usage summed in one ungrouped query (the grand total, however many groups).

        Raises:
            StoreError: The database failed.
        """
        with self._core("summing all usage", single=True) as conn:
            row = conn.execute(core_select(*usage_columns()).select_from(RunRow)).one()
        return usage_totals_of(row)
