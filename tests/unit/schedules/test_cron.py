"""Cron expressions and slots of the engine's schedules (issue 28 item 8): 5 fields or 6 with seconds
first, in UTC; the latest slot at or before a moment, the next one after it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from octipusd.durable.schedules import check_cron, latest_slot, next_slot
from octipusd.errors import InvalidRequestError

MONDAY_7 = datetime(2026, 12, 7, 7, 0, tzinfo=UTC)  # a Monday


def test_five_or_six_fields_are_taken_and_anything_else_names_the_field() -> None:
    assert check_cron("  0 7  * * 1-5 ") == "0 7 * * 1-5"
    assert check_cron("*/2 * * * * *") == "*/2 * * * * *"
    for bad in ("", "0 7 * *", "0 7 * * 1-5 * 2026", "0 25 * * *", "every day"):
        with pytest.raises(InvalidRequestError, match=r"^cron: "):
            check_cron(bad)


def test_the_latest_slot_is_at_or_before_the_moment_and_the_next_strictly_after() -> None:
    weekdays = "0 7 * * 1-5"
    assert latest_slot(weekdays, MONDAY_7) == MONDAY_7
    assert latest_slot(weekdays, MONDAY_7 - timedelta(microseconds=1)) == MONDAY_7 - timedelta(
        days=3
    )  # Friday
    assert next_slot(weekdays, MONDAY_7) == MONDAY_7 + timedelta(days=1)
    paris = timezone(timedelta(hours=1))
    assert latest_slot(weekdays, MONDAY_7.astimezone(paris)) == MONDAY_7  # UTC, whatever the moment's zone
    assert latest_slot(
        "*/2 * * * * *", MONDAY_7 + timedelta(seconds=3, milliseconds=500)
    ) == MONDAY_7 + timedelta(seconds=2)
