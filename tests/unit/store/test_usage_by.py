"""Usage summed per run, per session and per model row by the database (issue 16, the usage view)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import pytest

from octipusd.errors import InvalidRequestError
from octipusd.store import Store


@dataclass(frozen=True)
class Seeded:
    """What :func:`seed_usage` wrote: a session from model row ``sonnet-row`` with two runs (one
    estimated, one without a cost) and a session without a model row with one run."""

    row_id: str
    with_row: str
    without_row: str
    runs: tuple[str, str, str]


def seed_usage(store: Store, *, title: str = "refactor <b>parser</b>", workspace: str = "/w") -> Seeded:
    """Write the sessions and finished runs :class:`Seeded` describes."""
    row = store.create_model_row(name="sonnet-row", adapter="claude-code", model="sonnet")
    first = store.create_session(
        workspace=workspace, adapter="claude-code", model="sonnet", model_row_id=row.id, title=title
    )
    second = store.create_session(workspace=workspace, adapter="codex", model="gpt-5")
    a = store.create_run(session_id=first.id, prompt="one", owner="o")
    b = store.create_run(session_id=first.id, prompt="two", owner="o")
    c = store.create_run(session_id=second.id, prompt="three", owner="o")
    figures = {
        a.id: dict(input_tokens=100, output_tokens=10, cache_read_input_tokens=5, cost_usd=Decimal("0.25")),
        b.id: dict(input_tokens=40, output_tokens=4, cost_usd=None, usage_estimated=True),
        c.id: dict(input_tokens=7, output_tokens=3, cache_creation_input_tokens=2, cost_usd=Decimal("1.5")),
    }
    for run_id, values in figures.items():
        store.update_run(run_id, **values)
        store.finish_run(run_id, status="succeeded")
    return Seeded(row.id, first.id, second.id, (a.id, b.id, c.id))


def test_usage_is_summed_per_session_model_row_and_run(store_url: str) -> None:
    with Store.open(store_url) as store:
        seeded = seed_usage(store)

        by_session = {g.key: g for g in store.usage_by("session")}
        assert set(by_session) == {seeded.with_row, seeded.without_row}
        mine = by_session[seeded.with_row]
        assert (mine.name, mine.session_id, mine.adapter, mine.model) == (
            "refactor <b>parser</b>",
            seeded.with_row,
            "claude-code",
            "sonnet",
        )
        totals = mine.totals
        assert (totals.runs, totals.input_tokens, totals.output_tokens) == (2, 140, 14)
        assert (totals.cache_read_input_tokens, totals.runs_without_cost, totals.estimated) == (5, 1, True)
        assert totals.cost_usd == Decimal("0.25")
        assert mine.totals == store.usage_totals(seeded.with_row)  # the session's own totals agree

        by_row = {g.key: g for g in store.usage_by("model_row")}
        assert set(by_row) == {seeded.row_id, None}
        assert by_row[seeded.row_id].name == "sonnet-row" and by_row[seeded.row_id].totals.runs == 2
        bare = by_row[None]
        assert (bare.name, bare.adapter, bare.model, bare.session_id) == (None, "codex", "gpt-5", None)
        assert bare.totals.cost_usd == Decimal("1.5") and not bare.totals.estimated

        by_run = store.usage_by("run")
        assert [g.key for g in by_run] == list(reversed(seeded.runs))  # newest first
        assert [g.totals.runs for g in by_run] == [1, 1, 1]
        assert by_run[1].totals.cost_usd is None and by_run[1].totals.estimated
        assert by_run[0].last_run_at.tzinfo is not None

        assert len(store.usage_by("run", limit=2)) == 2
        with pytest.raises(InvalidRequestError, match="usage grouping"):
            store.usage_by("model")
        with pytest.raises(InvalidRequestError, match="limit"):
            store.usage_by("run", limit=0)


def test_the_grand_total_sums_every_run_beyond_the_listed_groups(store_url: str) -> None:
    with Store.open(store_url) as store:
        assert store.usage_total().runs == 0
        seed_usage(store)
        total = store.usage_total()
        assert (total.runs, total.input_tokens, total.output_tokens) == (3, 147, 17)
        assert (total.cache_read_input_tokens, total.cache_creation_input_tokens) == (5, 2)
        assert (total.runs_without_cost, total.estimated) == (1, True)
        assert total.cost_usd == Decimal("1.75")
        assert len(store.usage_by("run", limit=1)) == 1  # a page listing one group still has the total
