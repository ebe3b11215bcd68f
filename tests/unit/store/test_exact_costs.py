"""Costs are exact in the store (issue 26 item 4), on SQLite and PostgreSQL: amounts go in and come
back as decimals, the database sums them exactly, and migration 0012 keeps every existing figure
(the float noise of ``0.03 - 0.01`` below a nano-dollar excepted)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from octipusd.errors import StoreError
from octipusd.store import Store, make_engine, upgrade
from octipusd.store.engine import WRITE_OPTION
from octipusd.store.migrate import alembic_config, current_revision
from tests.unit.store.legacy_costs import FIGURES, TOTAL, seed_legacy_costs


def test_amounts_are_stored_and_summed_exactly(store_url: str) -> None:
    """Ten runs of $0.10 cost $1 (a float sum is 0.9999999999999999); figures keep every nano-dollar."""
    with Store.open(store_url) as store:
        session = store.create_session(workspace="/w", adapter="claude-code")
        tenths = [store.create_run(session_id=session.id, prompt="p", owner="o").id for _ in range(10)]
        for run_id in tenths:
            store.finish_run(run_id, status="succeeded", accounting={"cost_usd": Decimal("0.1")})
        assert store.usage_totals(session.id).cost_usd == Decimal("1")
        fine = store.create_run(session_id=session.id, prompt="p", owner="o")
        assert store.update_run(fine.id, cost_usd=Decimal("0.15339075")).cost_usd == Decimal("0.15339075")
        assert store.get_run(fine.id).cost_usd == Decimal("0.15339075")
        total = store.usage_total()
        assert total.cost_usd == Decimal("1.15339075") and isinstance(total.cost_usd, Decimal)
        by_run = {g.key: g.totals.cost_usd for g in store.usage_by("run")}
        assert by_run[fine.id] == Decimal("0.15339075") and by_run[tenths[0]] == Decimal("0.1")


def _result_costs(url: str) -> dict[str, object]:
    """run id -> ``cost_usd`` of its stored result event, as the JSON holds it."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT run_id, kind, data FROM run_events")).all()
    finally:
        engine.dispose()
    texts = {run_id: json.loads(data) for run_id, kind, data in rows if kind == "result"}
    assert all(json.loads(data) == {"text": "done"} for _, kind, data in rows if kind == "text")
    assert all(data["raw"]["total_cost_usd"] == 0.03 for data in texts.values())  # the vendor's, kept
    return {run_id: data["cost_usd"] for run_id, data in texts.items()}


def test_migration_keeps_the_existing_figures(store_url: str, tmp_path: Path) -> None:
    seeded = seed_legacy_costs(store_url, tmp_path)
    upgrade(store_url)
    with Store.open(store_url) as store:
        for key, (_, amount) in FIGURES.items():
            run = store.get_run(seeded.runs[key])
            assert run.cost_usd == amount and (amount is None or isinstance(run.cost_usd, Decimal)), key
        totals = store.usage_totals(seeded.session_id)
        assert (totals.cost_usd, totals.runs_without_cost) == (TOTAL, 1)
    # the result events hold the API's exact text (the vendor's raw object is left alone)
    assert _result_costs(store_url) == {
        seeded.runs["a"]: "0.0245",
        seeded.runs["b"]: "0.004",
        seeded.runs["c"]: "0.02",
        seeded.runs["d"]: None,
    }


def test_the_migration_goes_back_to_float_figures(store_url: str, tmp_path: Path) -> None:
    seeded = seed_legacy_costs(store_url, tmp_path)
    upgrade(store_url)
    engine = make_engine(store_url)
    try:
        with engine.connect().execution_options(**{WRITE_OPTION: True}) as conn, conn.begin():
            command.downgrade(_config(conn), "0011")
        assert current_revision(engine) == "0011"
        with engine.connect() as conn:
            figures = dict(conn.execute(sa.text("SELECT id, cost_usd FROM runs")).all())
    finally:
        engine.dispose()
    assert figures == {seeded.runs[key]: None if a is None else float(a) for key, (_, a) in FIGURES.items()}
    assert _result_costs(store_url) == {seeded.runs[key]: figures[seeded.runs[key]] for key in FIGURES}


def _config(conn: sa.Connection) -> Config:
    config = alembic_config()
    config.attributes["connection"] = conn
    return config


def test_a_float_is_refused_not_rounded_silently(store_url: str) -> None:
    """Binary floats never reach the money column: only a Decimal amount does."""
    with Store.open(store_url) as store:
        session = store.create_session(workspace="/w", adapter="claude-code")
        run = store.create_run(session_id=session.id, prompt="p", owner="o")
        with pytest.raises(StoreError, match="must be a Decimal"):
            store.update_run(run.id, cost_usd=0.5)
        assert store.get_run(run.id).cost_usd is None


def test_a_figure_past_the_money_bound_is_migrated_as_not_reported(store_url: str, tmp_path: Path) -> None:
    """An adapter once stored any finite float: 1e12 dollars is past a BIGINT of nano-dollars, so the
    migration keeps it as no figure (as ``octipusd.money.usd`` reads it) rather than failing the start."""
    seeded = seed_legacy_costs(store_url, tmp_path)
    engine = make_engine(store_url)
    try:
        with engine.connect().execution_options(**{WRITE_OPTION: True}) as conn, conn.begin():
            conn.execute(
                sa.text("UPDATE runs SET cost_usd = :huge WHERE id = :id"),
                {"huge": 1e12, "id": seeded.runs["a"]},
            )
    finally:
        engine.dispose()
    upgrade(store_url)
    with Store.open(store_url) as store:
        assert store.get_run(seeded.runs["a"]).cost_usd is None
        assert store.get_run(seeded.runs["b"]).cost_usd == FIGURES["b"][1]
