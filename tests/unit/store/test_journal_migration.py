"""Migration 0006 (in-flight bounds of the action journal) on records an older daemon wrote."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from alembic import command

from octipusd.store import Store
from octipusd.store.engine import WRITE_OPTION, make_engine
from octipusd.store.migrate import alembic_config, current_revision, upgrade

_T0 = datetime(2031, 1, 1, tzinfo=UTC)
_COLUMNS = ("id", "user", "origin", "tool", "args_hash", "risk_class", "deadline_seconds", "owner", "outcome")


def _actions() -> sa.TableClause:
    return sa.table(
        "tool_actions",
        *(sa.column(name) for name in _COLUMNS),
        sa.column("recovery_state"),
        sa.column("review_id"),
        sa.column("started_at", sa.DateTime(timezone=True)),
    )


def _row(action_id: str, outcome: str, state: str | None = None) -> dict[str, object]:
    return {
        "id": action_id,
        "user": "alice",
        "origin": "manual",
        "tool": "ledger.append_entry",
        "args_hash": "0" * 64,
        "risk_class": "compensatable",
        "deadline_seconds": 3600.0,
        "owner": "old-daemon",
        "outcome": outcome,
        "recovery_state": state,
        "review_id": None,
        "started_at": _T0,
    }


def test_old_records_get_a_bound_that_never_settles_an_unresolved_one_too_early(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        upgrade(engine, "0005")
        rows = [
            _row("a" * 32, "completed"),
            _row("b" * 32, "uncertain", "effect_unconfirmed"),  # unresolved: may still be in flight
            _row("c" * 32, "uncertain", "verified"),
            _row("d" * 32, "started"),  # an orphan of a killed pre-upgrade daemon
        ]
        with engine.begin() as conn:
            conn.execute(sa.insert(_actions()), rows)
        upgrade(engine)
        store = Store(engine)
        bounds = {a.id[0]: a.in_flight_until for a in store.list_actions(user="alice")}
        longest = _T0 + timedelta(seconds=7205)
        assert bounds == {"a": _T0, "b": longest, "c": _T0, "d": longest}
        for action in store.list_actions(user="alice"):
            assert action.dispatch is None and action.dispatch_ended_at is None
        # down to 0005 and up again
        config = alembic_config()
        with engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                config.attributes["connection"] = conn
                command.downgrade(config, "0005")
        assert current_revision(engine) == "0005"
        assert "in_flight_until" not in {c["name"] for c in sa.inspect(engine).get_columns("tool_actions")}
        upgrade(engine)
        assert len(Store(engine).list_actions(user="alice")) == 4
    finally:
        engine.dispose()
