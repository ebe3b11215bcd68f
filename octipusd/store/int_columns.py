"""The range of the store's integer columns, read from their SQL types (issue 26 item 6).

An integer a client sends that is compared with or written to a column must fit the column's type
on every backend: PostgreSQL refuses a value past an ``INTEGER`` column's 32 bits
(``NumericValueOutOfRange``), where SQLite, which stores every integer in up to 64 bits, would
answer. The API declares each integer parameter's bounds from the column it meets
(:func:`int_column_max`), so the schema shows them and a value past them is refused before the
store sees it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect

__all__ = ["SQL_INT_MAX", "int_column_max"]

#: The largest value of each SQL integer type, as PostgreSQL (the narrower backend) stores it.
SQL_INT_MAX: Final[Mapping[str, int]] = MappingProxyType(
    {"SMALLINT": 2**15 - 1, "INTEGER": 2**31 - 1, "BIGINT": 2**63 - 1}
)

_POSTGRESQL: Final[Dialect] = postgresql.dialect()  # type: ignore[no-untyped-call]


def int_column_max(column: Any) -> int:
    """The largest value ``column`` holds on every backend: its PostgreSQL type's.

    Args:
        column: An integer column of a table (``RunEventRow.seq``, which SQLModel types as ``int``).

    Raises:
        ValueError: ``column`` is not an integer column (a bug of the caller).
    """
    sql_type: str = column.type.compile(dialect=_POSTGRESQL)
    if sql_type not in SQL_INT_MAX:
        raise ValueError(f"{column} is a {sql_type} column, not an integer one")
    return SQL_INT_MAX[sql_type]
