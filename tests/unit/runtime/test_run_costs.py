"""A run's cost through the supervisor (issue 26 item 4), on SQLite and PostgreSQL: the vendor's
figure is kept exactly on the run and in its result event, and a session's runs sum exactly
(``0.1 + 0.2`` is ``0.3``, not the float ``0.30000000000000004``)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from octipusd.store.repository import Store
from octipusd.testing.replay import Recording
from tests.unit.runtime.test_supervisor import Script, _daemon, _init, _kinds, _new_session, _result, _turn

pytestmark = pytest.mark.anyio


def _costing(total_cost_usd: float) -> Script:
    """A Claude process answering one turn whose ``total_cost_usd`` is the given JSON number."""

    def script(sid: str) -> Recording:
        result = _result(sid, "done")
        result["total_cost_usd"] = total_cost_usd
        return Recording.of([_init(sid), result])

    return script


async def test_runs_keep_their_vendors_figure_exactly_and_a_session_sums_them(
    store: Store, tmp_path: Path
) -> None:
    async with _daemon(store, tmp_path, [_costing(0.1), _costing(0.2)]) as (runs, _launcher):
        session = _new_session(store, tmp_path)
        first = await _turn(runs, session)
        second = await _turn(runs, session, "again")
    assert (first.cost_usd, second.cost_usd) == (Decimal("0.1"), Decimal("0.2"))
    # the result event holds the exact text the API sends
    assert [d["cost_usd"] for k, d in _kinds(store, second.id) if k == "result"] == ["0.2"]
    assert store.usage_totals(session).cost_usd == Decimal("0.3")
