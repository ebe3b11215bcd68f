"""The range of an integer column is its SQL type's on PostgreSQL, the narrower backend (issue 26
item 6: an ``after`` past a 32-bit ``seq`` was a 500 there); the API's bounds are read from it."""

from __future__ import annotations

import pytest

from octipusd.api.limits import API_LIMITS, MAX_EVENT_SEQ, MAX_GRANT_USES, MAX_MESSAGE_SEQ
from octipusd.store.int_columns import SQL_INT_MAX, int_column_max
from octipusd.store.models import RunEventRow, RunRow


def test_a_column_holds_its_sql_types_range_and_the_api_bounds_follow() -> None:
    assert int_column_max(RunEventRow.seq) == 2**31 - 1  # INTEGER
    assert int_column_max(RunEventRow.id) == 2**63 - 1  # BIGINT (SQLite's rowid there)
    assert int_column_max(RunRow.input_tokens) == 2**63 - 1
    assert MAX_EVENT_SEQ == MAX_MESSAGE_SEQ == MAX_GRANT_USES == 2**31 - 1
    assert API_LIMITS.max_int == SQL_INT_MAX["BIGINT"]  # a JSON body's integers: the widest column
    with pytest.raises(ValueError, match=r"RunEventRow\.kind is a TEXT column"):
        int_column_max(RunEventRow.kind)
