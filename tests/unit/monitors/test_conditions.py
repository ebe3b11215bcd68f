"""A monitor's condition (FACTS.md §7): the operators, dotted paths, ``changed`` and "unavailable"."""

from __future__ import annotations

from typing import Any

import pytest

from octipusd.errors import InvalidRequestError
from octipusd.monitors.conditions import NO_BASELINE, Verdict, judge, parse_condition

DOC = {"status": "running", "items": [{"title": "a", "status": "done"}], "tags": ["x", "y"], "n": 0}


def verdict(raw: dict[str, Any], result: Any = DOC, baseline: Any = NO_BASELINE) -> Verdict:
    return judge(parse_condition(raw), result, baseline).verdict


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"path": "status", "operator": "equals", "value": "running"}, Verdict.MATCH),
        ({"path": "status", "operator": "equals", "value": "done"}, Verdict.NO_MATCH),
        ({"path": "status", "operator": "in", "value": ["completed", "running"]}, Verdict.MATCH),
        ({"path": "status", "operator": "in", "value": ["completed"]}, Verdict.NO_MATCH),
        ({"path": "status", "operator": "contains", "value": "unn"}, Verdict.MATCH),
        ({"path": "tags", "operator": "contains", "value": "y"}, Verdict.MATCH),
        ({"path": "items.0", "operator": "contains", "value": "title"}, Verdict.MATCH),
        ({"path": "items.0.status", "operator": "equals", "value": "done"}, Verdict.MATCH),
        ({"path": "n", "operator": "contains", "value": "0"}, Verdict.NO_MATCH),
        ({"path": "", "operator": "contains", "value": "status"}, Verdict.MATCH),
        ({"path": "missing", "operator": "equals", "value": None}, Verdict.UNAVAILABLE),
        ({"path": "items.5.status", "operator": "equals", "value": "done"}, Verdict.UNAVAILABLE),
        ({"path": "status.deeper", "operator": "in", "value": ["x"]}, Verdict.UNAVAILABLE),
    ],
)
def test_operators_on_a_dotted_path(raw: dict[str, Any], expected: Verdict) -> None:
    assert verdict(raw) is expected


def test_changed_takes_the_first_good_read_as_baseline_and_a_missing_field_is_no_change() -> None:
    changed = {"path": "status", "operator": "changed"}
    first = judge(parse_condition(changed), DOC)
    assert first.verdict is Verdict.BASELINE and first.observed == "running"
    assert verdict(changed, DOC, "running") is Verdict.NO_MATCH
    assert verdict(changed, {"other": 1}, "running") is Verdict.UNAVAILABLE  # missing: not a change
    assert verdict(changed, {"status": "done"}, "running") is Verdict.MATCH
    assert verdict({"path": "", "operator": "changed"}, {"a": 1}, {"a": 1}) is Verdict.NO_MATCH


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"path": "s", "operator": "near", "value": 1},
            "operator: must be one of equals, in, contains, changed",
        ),
        ({"path": "s", "operator": "in", "value": "x"}, "the in operator takes a list"),
        ({"path": "s", "operator": "equals"}, "value: required for the equals operator"),
        ({"path": "s", "operator": "contains", "value": {"a": 1}}, "contains operator takes a string"),
        ({"path": 3, "operator": "changed"}, "path: must be a dotted path"),
        ({"operator": "changed", "extra": 1}, "extra: unknown field"),
        ("status", "must be an object"),
    ],
)
def test_bad_conditions_are_refused_naming_the_field(raw: Any, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        parse_condition(raw)
