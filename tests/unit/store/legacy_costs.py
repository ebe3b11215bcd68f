"""A database as octipusd left it before costs were exact (schema revision 0011): runs whose cost is
a binary float (``runs.cost_usd``) and result events whose ``cost_usd`` is a JSON number. Shared by
the migration test and the daemon test of issue 26 item 4."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import sqlalchemy as sa

from octipusd.store import make_engine, upgrade
from octipusd.store.engine import WRITE_OPTION
from octipusd.store.models import UTCDateTime

__all__ = ["LegacyCosts", "seed_legacy_costs"]

#: The run figures stored as floats, and what each must read as once exact (run key -> float, amount).
FIGURES: dict[str, tuple[float | None, Decimal | None]] = {
    "a": (0.0245, Decimal("0.0245")),
    "b": (0.004, Decimal("0.004")),
    # Claude's cumulative 0.03 after 0.01, as main subtracted it
    "c": (0.03 - 0.01, Decimal("0.02")),
    "d": (None, None),
}
#: What the runs sum to, exactly.
TOTAL: Decimal = Decimal("0.0485")


@dataclass(frozen=True)
class LegacyCosts:
    """What :func:`seed_legacy_costs` wrote.

    Attributes:
        session_id: The session holding the runs.
        runs: Run key (``a``...``d`` of :data:`FIGURES`) -> run id, oldest first.
    """

    session_id: str
    runs: dict[str, str]


def seed_legacy_costs(url: str, workspace: Path) -> LegacyCosts:
    """Migrate ``url`` to revision 0011 and write one session, its four finished runs with float
    costs, and each run's ``result`` event (with the same float, or null) and a ``text`` event."""
    upgrade(url, "0011")
    meta = sa.MetaData()
    stamp = UTCDateTime()
    sessions = _table(
        meta, "sessions", "id workspace adapter permission_mode", created_at=stamp, updated_at=stamp
    )
    sessions.append_column(sa.Column("attended", sa.Boolean()))
    tokens = " ".join(f"{n}_tokens" for n in ("input", "output", "cache_creation_input", "cache_read_input"))
    runs = _table(
        meta,
        "runs",
        f"id session_id turn_index status prompt owner {tokens}",
        resumed=sa.Boolean(),
        usage_estimated=sa.Boolean(),
        cost_usd=sa.Float(),
        created_at=stamp,
        ended_at=stamp,
    )
    events = _table(meta, "run_events", "run_id seq kind data", created_at=stamp)
    start = datetime(2026, 12, 1, tzinfo=UTC)
    session_id = "5" * 32
    ids = {key: f"{index:032d}" for index, key in enumerate(FIGURES, start=1)}
    engine = make_engine(url)
    try:
        with engine.connect().execution_options(**{WRITE_OPTION: True}) as conn, conn.begin():
            conn.execute(
                sessions.insert().values(
                    id=session_id,
                    workspace=str(workspace),
                    adapter="claude-code",
                    permission_mode="workspace",
                    attended=True,
                    created_at=start,
                    updated_at=start,
                )
            )
            for turn, (key, (figure, _)) in enumerate(FIGURES.items(), start=1):
                moment = start + timedelta(minutes=turn)
                conn.execute(
                    runs.insert().values(
                        id=ids[key],
                        session_id=session_id,
                        turn_index=turn,
                        status="succeeded",
                        prompt=f"turn {key}",
                        owner="a-daemon-long-gone",
                        resumed=False,
                        usage_estimated=False,
                        input_tokens=10,
                        output_tokens=2,
                        cache_creation_input_tokens=0,
                        cache_read_input_tokens=0,
                        cost_usd=figure,
                        created_at=moment,
                        ended_at=moment,
                    )
                )
                result = {"is_error": False, "subtype": "success", "text": "done", "cost_usd": figure}
                result["raw"] = {"type": "result", "total_cost_usd": 0.03}
                conn.execute(
                    events.insert(),
                    [
                        {
                            "run_id": ids[key],
                            "seq": 1,
                            "kind": "text",
                            "data": '{"text":"done"}',
                            "created_at": moment,
                        },
                        {
                            "run_id": ids[key],
                            "seq": 2,
                            "kind": "result",
                            "data": _json(result),
                            "created_at": moment,
                        },
                    ],
                )
    finally:
        engine.dispose()
    return LegacyCosts(session_id, ids)


def _table(meta: sa.MetaData, name: str, plain: str, **typed: sa.types.TypeEngine[object]) -> sa.Table:
    """The columns of table ``name`` this seed writes: untyped ones, then typed ones."""
    columns = [sa.Column(column) for column in plain.split()]
    return sa.Table(name, meta, *columns, *(sa.Column(column, kind) for column, kind in typed.items()))


def _json(data: dict[str, object]) -> str:
    return json.dumps(data, separators=(",", ":"), allow_nan=False)
