"""API route of usage and cost per run, per session or per model row (issue 16, the usage view).

Routes (under ``/v1``)::

    GET /usage?by=run|session|model_row&limit=N   newest groups first

Each group carries the same totals as ``GET /v1/sessions/{id}/usage`` (tokens, ``cost_usd`` summed
from what the vendors reported, ``runs_without_cost``, ``estimated``), summed by the database.
An unknown ``by`` is a 400 listing the accepted values.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from octipusd.api.common import Services, out
from octipusd.api.models import API_VERSION, UsageTotalsOut
from octipusd.store.aio import in_thread
from octipusd.store.usage_store import MAX_USAGE_GROUPS, UsageGroup

__all__ = ["By", "UsageGroupOut", "UsageReportOut", "usage_report", "usage_router"]

GroupLimit = Annotated[int, Query(ge=1, le=MAX_USAGE_GROUPS)]
By = Literal["run", "session", "model_row"]


class UsageGroupOut(UsageTotalsOut):
    """The usage of one run, session or model row.

    ``key`` is the run, session or model row id (null by model row: sessions created without a
    model row, grouped by adapter and model); ``name`` the session's title or the model row's name.
    """

    key: str | None
    name: str | None
    session_id: str | None
    adapter: str
    model: str | None
    last_run_at: datetime


class UsageReportOut(UsageTotalsOut):
    """``GET /v1/usage``: the groups (newest first) and, in the top-level fields, their sum."""

    by: By
    groups: list[UsageGroupOut]


def _group_out(group: UsageGroup) -> UsageGroupOut:
    totals = out(UsageTotalsOut, group.totals).model_dump()
    return UsageGroupOut(
        key=group.key,
        name=group.name,
        session_id=group.session_id,
        adapter=group.adapter,
        model=group.model,
        last_run_at=group.last_run_at,
        **totals,
    )


async def usage_report(services: Services, by: By, limit: int) -> UsageReportOut:
    """The usage report the route answers (the web page renders the same), summed over the groups."""
    groups = [_group_out(g) for g in await in_thread(services.store.usage_by, by, limit=limit)]
    costs = [g.cost_usd for g in groups if g.cost_usd is not None]
    return UsageReportOut(
        by=by,
        groups=groups,
        runs=sum(g.runs for g in groups),
        input_tokens=sum(g.input_tokens for g in groups),
        output_tokens=sum(g.output_tokens for g in groups),
        cache_creation_input_tokens=sum(g.cache_creation_input_tokens for g in groups),
        cache_read_input_tokens=sum(g.cache_read_input_tokens for g in groups),
        cost_usd=sum(costs, Decimal(0)) if costs else None,
        runs_without_cost=sum(g.runs_without_cost for g in groups),
        estimated=any(g.estimated for g in groups),
    )


def usage_router(services: Services) -> APIRouter:
    """The usage route over ``services``."""
    router = APIRouter(prefix=f"/{API_VERSION}")

    @router.get("/usage")
    async def usage(by: By = "session", limit: GroupLimit = 100) -> UsageReportOut:
        """Usage and cost per run, session or model row, newest first (at most ``limit`` groups;
        the top-level totals sum the groups listed)."""
        return await usage_report(services, by, limit)

    return router
