"""Exact costs.

Hand-written (issue 26 item 4). ``runs.cost_usd`` (a binary float: ``0.03 - 0.01`` was stored as
``0.019999999999999997``) becomes ``runs.cost_nano_usd``, whole nano-dollars (``BIGINT``), which
both databases sum exactly. Each existing figure is taken by its shortest decimal text (the text the
vendor wrote, for any figure of at most 15 significant digits) and rounded half up to a nano-dollar,
the rule :mod:`octipusd.money` applies to every new figure: ``0.0245`` stays ``0.0245``, and
``0.019999999999999997`` (float noise below a nano-dollar) becomes ``0.02``. A run without a
figure keeps NULL.

The ``cost_usd`` of stored ``result`` events (a JSON number) becomes the exact decimal string the
API sends for new ones (``"0.02"``), by the same rule; the vendor's own ``raw`` object is left as it
was. The conversion is written out here, not imported, so that this revision keeps meaning what
it meant.

Revision ID: 0012
Revises: 0011
Create Date: 2027-01-10 00:00:00
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Final

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Nano-dollars in a dollar.
_NANOS_PER_USD: Final = 10**9
#: The largest figure kept, in US dollars (``octipusd.money.MAX_FIGURE_USD`` when this was written).
_MAX_FIGURE_USD: Final = 1_000_000
#: Rows converted per statement (runs, result events).
_BATCH_ROWS: Final = 500


def _nanos(figure: object) -> int | None:
    """A stored float figure (US dollars) as whole nano-dollars; None for no figure, not a number, or
    a figure past :data:`_MAX_FIGURE_USD` (what ``octipusd.money.usd`` takes for not reported: an
    adapter once stored any finite float, and 1e12 dollars in nano-dollars is past a BIGINT)."""
    if isinstance(figure, bool) or not isinstance(figure, int | float) or not math.isfinite(figure):
        return None
    if abs(figure) > _MAX_FIGURE_USD:
        return None
    exact = Decimal(repr(float(figure))) * _NANOS_PER_USD
    return int(exact.to_integral_value(rounding=ROUND_HALF_UP))


def _text(nanos: int) -> str:
    """Whole nano-dollars as the API's exact decimal string (no exponent, no trailing zeros)."""
    text = format(Decimal(nanos).scaleb(-9), "f")
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return "0" if text in ("", "-0") else text


def _float(text: object) -> float | None:
    """The API's decimal string back to a float figure (for the downgrade)."""
    if not isinstance(text, str):
        return None
    try:
        return float(Decimal(text))
    except ArithmeticError:
        return None


def _convert_runs(conn: sa.Connection, source: str, target: str, convert: Callable[[Any], Any]) -> None:
    runs = sa.table("runs", sa.column("id"), sa.column(source), sa.column(target))
    rows = conn.execute(sa.select(runs.c.id, runs.c[source]).where(runs.c[source].is_not(None))).all()
    update = runs.update().where(runs.c.id == sa.bindparam("run_id")).values({target: sa.bindparam("value")})
    for start in range(0, len(rows), _BATCH_ROWS):
        batch = [
            {"run_id": run_id, "value": convert(figure)}
            for run_id, figure in rows[start : start + _BATCH_ROWS]
        ]
        conn.execute(update, batch)


def _convert_results(conn: sa.Connection, convert: Callable[[Any], Any]) -> None:
    """Rewrite ``cost_usd`` in every stored ``result`` event's data, in batches by id."""
    events = sa.table("run_events", sa.column("id"), sa.column("kind"), sa.column("data"))
    update = events.update().where(events.c.id == sa.bindparam("event_id")).values(data=sa.bindparam("value"))
    last = -1
    while True:
        page = conn.execute(
            sa.select(events.c.id, events.c.data)
            .where(events.c.kind == "result", events.c.id > last)
            .order_by(events.c.id)
            .limit(_BATCH_ROWS)
        ).all()
        if not page:
            return
        last = page[-1][0]
        changed = []
        for event_id, text in page:
            data = json.loads(text)
            figure = convert(data.get("cost_usd")) if isinstance(data, dict) else None
            if figure is None:  # no figure, or not one this direction converts: left as it is
                continue
            data["cost_usd"] = figure
            changed.append(
                {"event_id": event_id, "value": json.dumps(data, separators=(",", ":"), allow_nan=False)}
            )
        if changed:
            conn.execute(update, changed)


def _event_text(figure: object) -> str | None:
    nanos = _nanos(figure)
    return None if nanos is None else _text(nanos)


def upgrade() -> None:
    conn = op.get_bind()
    op.add_column("runs", sa.Column("cost_nano_usd", sa.BigInteger(), nullable=True))
    _convert_runs(conn, "cost_usd", "cost_nano_usd", _nanos)
    # a plain column: SQLite (>= 3.35) drops it in place (see 0009)
    op.drop_column("runs", "cost_usd")
    _convert_results(conn, _event_text)


def downgrade() -> None:
    conn = op.get_bind()
    op.add_column("runs", sa.Column("cost_usd", sa.Float(), nullable=True))
    _convert_runs(conn, "cost_nano_usd", "cost_usd", lambda nanos: int(nanos) / _NANOS_PER_USD)
    op.drop_column("runs", "cost_nano_usd")
    _convert_results(conn, _float)
