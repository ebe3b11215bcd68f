"""``monitor__create``'s arguments (FACTS.md §7): the sources, the probes a monitor may run, the limits."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from octipusd.errors import InvalidRequestError
from octipusd.monitors.probes import ProbeRegistry
from octipusd.monitors.spec import MonitorLimits, parse_spec
from octipusd.store.repository import Store

NOW = datetime(2026, 12, 8, 12, 0, tzinfo=UTC)
LIMITS = MonitorLimits()
STATUS = {"kind": "tool", "name": "get_pipeline_status", "args": {"id": "p1"}}
DONE = {"path": "status", "operator": "in", "value": ["completed", "failed"]}


@pytest.fixture
def probes(tmp_path: Any) -> Iterator[ProbeRegistry]:
    with Store.open(f"sqlite:///{tmp_path / 'o.db'}") as store:
        yield ProbeRegistry(store, None)


def spec(probes: ProbeRegistry, **raw: Any) -> Any:
    return parse_spec(raw, probes, NOW, LIMITS)


def test_a_pipeline_status_probe_never_fetches_the_history_and_the_defaults_apply(
    probes: ProbeRegistry,
) -> None:
    parsed = spec(probes, source={**STATUS, "args": {"id": "p1", "includeHistory": True}}, condition=DONE)
    assert parsed.source == {
        "kind": "tool",
        "name": "get_pipeline_status",
        "args": {"id": "p1", "includeHistory": False},
    }
    assert parsed.interval_s == 30.0 and parsed.deadline_at == NOW + timedelta(seconds=1800)
    assert parsed.condition is not None and parsed.condition.to_json() == DONE


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("resume_pipeline", "resume_pipeline is a mutation and cannot be used as a monitor probe"),
        ("create_pipeline", "is a mutation"),
        ("shell__run", "is a mutation"),
        ("monitor__create", "is a mutation"),
        ("collect_children", "collect_children waits for children to finish and is not a monitor probe"),
        ("get_cli_run_context", "reads, but a monitor cannot probe it in this Octipus"),
        ("github__list_issues", "reads, but a monitor cannot probe it in this Octipus"),
        ("github__create_issue", "no read-only tool 'github__create_issue'"),
    ],
)
def test_mutations_and_waits_are_refused_as_probes(probes: ProbeRegistry, name: str, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        spec(probes, source={"kind": "tool", "name": name, "args": {}}, condition=DONE)


def test_a_browser_source_is_not_available(probes: ProbeRegistry) -> None:
    with pytest.raises(InvalidRequestError, match="browser sources are not available in this Octipus"):
        spec(probes, source={"kind": "browser", "tabId": 1, "url": "https://x", "selector": "#a"})


@pytest.mark.parametrize(
    ("field", "value", "ok"),
    [
        ("intervalSeconds", 10, True),
        ("intervalSeconds", 3600, True),
        ("intervalSeconds", 9.9, False),
        ("intervalSeconds", 3601, False),
        ("intervalSeconds", True, False),
        ("deadlineSeconds", 30, True),
        ("deadlineSeconds", 7 * 86_400, True),
        ("deadlineSeconds", 29, False),
        ("deadlineSeconds", 7 * 86_400 + 1, False),
    ],
)
def test_interval_and_deadline_bounds(probes: ProbeRegistry, field: str, value: Any, ok: bool) -> None:
    raw = {"source": STATUS, "condition": DONE, field: value}
    if ok:
        parsed = parse_spec(raw, probes, NOW, LIMITS)
        assert parsed.interval_s == value or parsed.deadline_at == NOW + timedelta(seconds=value)
    else:
        with pytest.raises(InvalidRequestError, match=field):
            parse_spec(raw, probes, NOW, LIMITS)


def test_event_and_time_sources(probes: ProbeRegistry) -> None:
    event = spec(
        probes,
        source={
            "kind": "event",
            "type": "pipeline_status",
            "fallback": {"name": "get_pipeline_status", "args": {"id": "p"}},
        },
        condition={"path": "to", "operator": "equals", "value": "completed"},
    )
    assert event.source["fallback"]["args"] == {"id": "p", "includeHistory": False}
    with pytest.raises(
        InvalidRequestError, match=r"source\.type: must be one of pipeline_status, run_finished"
    ):
        spec(probes, source={"kind": "event", "type": "anything"})
    with pytest.raises(InvalidRequestError, match=r"source\.fallback\.name: resume_pipeline is a mutation"):
        spec(
            probes, source={"kind": "event", "type": "run_finished", "fallback": {"name": "resume_pipeline"}}
        )
    timed = spec(probes, source={"kind": "time", "at": "2026-12-08T13:00:00Z"})
    assert timed.deadline_at == NOW + timedelta(hours=1) and timed.condition is None
    with pytest.raises(InvalidRequestError, match=r"source\.at: must be from now"):
        spec(probes, source={"kind": "time", "at": "2026-12-08T11:00:00Z"})
    with pytest.raises(InvalidRequestError, match="condition: a time source has none"):
        spec(probes, source={"kind": "time", "at": "2026-12-08T13:00:00Z"}, condition=DONE)
    with pytest.raises(InvalidRequestError, match="condition: required for a tool source"):
        spec(probes, source=STATUS)
