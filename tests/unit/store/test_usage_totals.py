"""A session's usage is summed by the database over every run (issue 14 item 8): no page limit."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from sqlalchemy import insert

from octipusd.store import Store
from octipusd.store.engine import WRITE_OPTION
from octipusd.store.models import RunRow

RUNS = 10_050  # more than the 10,000 runs the old summing loop read before it stopped silently


def _bulk_runs(store: Store, session_id: str) -> None:
    """``RUNS`` finished runs: every third in vendor thread ``v-1``, every fifth with no cost."""
    now = datetime.now(UTC)
    rows = [
        {
            "id": f"run-{i:05d}",
            "session_id": session_id,
            "turn_index": i,
            "status": "succeeded",
            "prompt": "p",
            "owner": "daemon-a",
            "created_at": now,
            "vendor_session_id": "v-1" if i % 3 == 0 else "v-2",
            "input_tokens": 10,
            "output_tokens": 2,
            "cache_creation_input_tokens": 1,
            "cache_read_input_tokens": 3,
            "cost_nano_usd": None if i % 5 == 0 else Decimal("0.5"),
            "usage_estimated": i == 7,
        }
        for i in range(RUNS)
    ]
    with store.engine.connect().execution_options(**{WRITE_OPTION: True}) as conn, conn.begin():
        conn.execute(insert(RunRow.__table__), rows)  # type: ignore[arg-type]


def test_usage_totals_sum_every_run_of_the_session(store_url: str) -> None:
    with Store.open(store_url) as store:
        session = store.create_session(workspace="/w", adapter="codex")
        other = store.create_session(workspace="/w", adapter="codex")
        _bulk_runs(store, session.id)
        store.update_run(
            store.create_run(session_id=other.id, prompt="elsewhere", owner="daemon-a").id, input_tokens=999
        )

        totals = store.usage_totals(session.id)
        assert totals.runs == RUNS
        assert (totals.input_tokens, totals.output_tokens) == (10 * RUNS, 2 * RUNS)
        assert (totals.cache_creation_input_tokens, totals.cache_read_input_tokens) == (RUNS, 3 * RUNS)
        without_cost = len(range(0, RUNS, 5))
        assert totals.runs_without_cost == without_cost
        assert totals.cost_usd == Decimal("0.5") * (RUNS - without_cost)
        assert totals.estimated

        thread = store.usage_totals(session.id, vendor_session_id="v-1", exclude_run_id="run-00000")
        assert thread.runs == len(range(0, RUNS, 3)) - 1
        assert thread.input_tokens == 10 * thread.runs and not thread.estimated

        fresh = store.usage_totals(store.create_session(workspace="/w", adapter="codex").id)
        assert (fresh.runs, fresh.input_tokens, fresh.cost_usd, fresh.estimated) == (0, 0, None, False)
