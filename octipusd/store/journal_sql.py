"""The journal's hot-path statements: SQLAlchemy Core, built once, executed with parameters.

``started`` and the outcome of a call (:meth:`JournalStoreMixin.start_action`,
:meth:`JournalStoreMixin.finish_action`) each write one action row change and one receipt entry.
They build no ORM instance and no new statement per call: each statement here is built once
per shape (backend, columns set) and SQLAlchemy's compiled cache does the rest.

On PostgreSQL the change and its receipt entry are one statement (the change in a ``WITH``
clause, the receipt inserted from the id it returned): one round trip, atomic by itself. On
SQLite (in-process: no round trips; no data-modifying ``WITH``) they are two statements of one
transaction.
"""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, bindparam, insert, update
from sqlalchemy.sql.expression import Executable

from octipusd.store.models import ActionReceiptRow, ToolActionRow

__all__ = [
    "ACTIONS",
    "RECEIPTS",
    "RECEIPT_COLUMNS",
    "finish_statement",
    "start_statement",
    "write_with_receipt",
]

#: The journal's tables.
ACTIONS: sa.Table = ToolActionRow.__table__  # type: ignore[attr-defined]
RECEIPTS: sa.Table = ActionReceiptRow.__table__  # type: ignore[attr-defined]
#: The receipt columns a journal write fills (the parameters of :func:`write_with_receipt`'s
#: ``receipt``).
RECEIPT_COLUMNS = ("action_id", "kind", "state", "data", "created_at")

#: A new action row / receipt entry (every column a parameter named after it).
INSERT_ACTION = insert(ACTIONS)
INSERT_RECEIPT = insert(RECEIPTS)
#: Prefix of the receipt's bind parameters in a combined (PostgreSQL) statement.
_RECEIPT_BIND = "receipt_"
#: Prefix of the new values' bind parameters of an outcome ``UPDATE`` (a bind parameter may not
#: be named after a column it sets).
_SET_BIND = "set_"


def _with_receipt(change: sa.Insert | sa.Update) -> Executable:
    """One statement: ``change`` (returning the action id) and the receipt entry of that id."""
    changed = change.returning(ACTIONS.c.id).cte("changed")
    values = [changed.c.id] + [
        bindparam(_RECEIPT_BIND + name, type_=RECEIPTS.c[name].type) for name in RECEIPT_COLUMNS[1:]
    ]
    return (
        insert(RECEIPTS)
        .from_select(list(RECEIPT_COLUMNS), sa.select(*values))
        .returning(RECEIPTS.c.id)  # an INSERT from a CTE reports no row count: count what it returns
    )


@functools.cache
def start_statement(sqlite: bool) -> Executable:
    """The ``INSERT`` of a new action (every column a parameter named after it)."""
    if sqlite:
        return INSERT_ACTION
    return _with_receipt(insert(ACTIONS).values({c.name: bindparam(c.name, type_=c.type) for c in ACTIONS.c}))


@functools.cache
def finish_statement(sqlite: bool, columns: tuple[str, ...]) -> Executable:
    """The ``UPDATE`` of ``columns`` of the action ``action_id`` while it is still ``started``
    (parameters: ``action_id`` and each column's new value; see :func:`finish_params`)."""
    change = (
        update(ACTIONS)
        .where(ACTIONS.c.id == bindparam("action_id"), ACTIONS.c.outcome == "started")
        .values({name: bindparam(_SET_BIND + name, type_=ACTIONS.c[name].type) for name in columns})
    )
    return change if sqlite else _with_receipt(change)


def finish_params(action_id: str, values: dict[str, Any]) -> dict[str, Any]:
    """The parameters of :func:`finish_statement` for ``values`` (column -> new value)."""
    return {"action_id": action_id, **{_SET_BIND + name: value for name, value in values.items()}}


def write_with_receipt(
    conn: Connection, sqlite: bool, change: Executable, params: dict[str, Any], receipt: dict[str, Any]
) -> bool:
    """Run ``change`` (from :func:`start_statement` or :func:`finish_statement`, whose conditions
    say who wins) with ``params`` and append ``receipt`` (the values of :data:`RECEIPT_COLUMNS`,
    its ``action_id`` the changed action's) only if it changed a row.

    Returns:
        True if the action row was changed (and the receipt written).
    """
    if sqlite:
        if not conn.execute(change, params).rowcount:
            return False
        conn.execute(INSERT_RECEIPT, receipt)
        return True
    binds = {_RECEIPT_BIND + name: receipt[name] for name in RECEIPT_COLUMNS[1:]}
    return bool(conn.execute(change, {**params, **binds}).all())
