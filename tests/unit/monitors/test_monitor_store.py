"""Monitors' records (FACTS.md §7) on SQLite and PostgreSQL: the per-session limit, the lifecycle's
guarded moves, what an event source reads."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from octipusd.errors import ConflictError, StoreError
from octipusd.store.monitor_records import MonitorStatus
from octipusd.store.pipeline_records import PipelineStatus
from octipusd.store.repository import Store

ARMED, PAUSED, READY, DELIVERING = (
    MonitorStatus.ARMED,
    MonitorStatus.PAUSED,
    MonitorStatus.READY,
    MonitorStatus.DELIVERING,
)


def _create(store: Store, session_id: str, max_active: int = 20) -> str:
    return store.create_monitor(
        session_id=session_id,
        user="ann",
        workspace="/w",
        source={"kind": "tool", "name": "get_work_plan", "args": {}},
        condition={"path": "plan", "operator": "changed"},
        continuation=None,
        interval_seconds=30.0,
        deadline_at=store.now() + timedelta(seconds=1800),
        max_active=max_active,
    ).id


def test_at_most_twenty_active_monitors_per_session_even_when_created_at_once(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code").id
    other = store.create_session(workspace="/w", adapter="claude-code").id
    for _ in range(19):
        _create(store, session)
    results: list[object] = []

    def create() -> None:
        try:
            results.append(_create(store, session))
        except ConflictError as exc:
            results.append(exc)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    refused = [r for r in results if isinstance(r, ConflictError)]
    assert len(results) - len(refused) == 1 and len(refused) == 3
    assert "has 20 active monitors, the most it may have (20)" in refused[0].message
    assert len(store.list_monitors(session_id=session, statuses=[ARMED])) == 20
    _create(store, other)  # the limit is per session
    ended = store.list_monitors(session_id=session)[0].id
    store.move_monitor(ended, MonitorStatus.CANCELLED, expect=(ARMED,))
    _create(store, session)  # an ended monitor no longer counts


def test_moves_happen_only_from_the_expected_status_and_stamp_their_times(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code").id
    monitor_id = _create(store, session)
    assert store.has_active_monitors()
    paused = store.move_monitor(monitor_id, PAUSED, expect=(ARMED,))
    assert paused.paused_at is not None and paused.ended_at is None
    with pytest.raises(ConflictError, match="is paused, not armed"):
        store.move_monitor(monitor_id, READY, expect=(ARMED,))
    unchanged = store.note_monitor_check(monitor_id, expect=(ARMED,), last_observation={"state": "no_match"})
    assert unchanged.checks == 0 and unchanged.last_observation is None  # a paused monitor records no check
    armed = store.move_monitor(monitor_id, ARMED, expect=(PAUSED,))
    assert armed.paused_at is None and armed.deadline_at == paused.deadline_at  # pausing moves no deadline
    checked = store.note_monitor_check(
        monitor_id, expect=(ARMED,), last_observation={"state": "baseline"}, baseline={"value": 1}
    )
    assert checked.checks == 1 and checked.baseline == {"value": 1}
    store.move_monitor(monitor_id, READY, expect=(ARMED,), match={"state": "match"})
    store.move_monitor(monitor_id, DELIVERING, expect=(READY,), fired="match")
    with pytest.raises(ConflictError):  # delivered once: a second claim fails
        store.move_monitor(monitor_id, DELIVERING, expect=(READY,), fired="match")
    done = store.move_monitor(
        monitor_id, MonitorStatus.COMPLETED, expect=(DELIVERING,), delivery={"mode": "turn"}
    )
    assert done.ended_at is not None and done.fired == "match" and done.delivery == {"mode": "turn"}
    assert not store.has_active_monitors()


def test_an_event_source_reads_only_its_own_sessions_changes_after_its_creation(store: Store) -> None:
    mine = store.create_session(workspace="/w", adapter="claude-code").id
    theirs = store.create_session(workspace="/w", adapter="claude-code").id

    def pipeline(session_id: str) -> str:
        return store.create_pipeline(
            session_id=session_id,
            user="ann",
            workspace="/w",
            name="p",
            template_id=None,
            template={},
            params={},
            graph={},
            nodes=[("n0", "step")],
        ).id

    before = pipeline(mine)
    store.set_pipeline_status(before, PipelineStatus.RUNNING)
    monitor = store.get_monitor(_create(store, mine))
    store.set_pipeline_status(before, PipelineStatus.COMPLETED)
    store.set_pipeline_status(pipeline(theirs), PipelineStatus.RUNNING)
    changes = store.session_pipeline_changes(mine, after=int(monitor.cursor["pipelineEvent"]))
    assert [(c["pipelineId"], c["from"], c["to"]) for c in changes] == [(before, "running", "completed")]
    assert store.session_pipeline_changes(mine, after=changes[-1]["cursor"]) == []


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_field_the_store_does_not_set_is_refused_with_the_stores_error(store: Store) -> None:
    monitor = _create(store, store.create_session(workspace="/w", adapter="claude-code").id)
    with pytest.raises(StoreError, match="'status' cannot be set here"):
        store.note_monitor_check(monitor, expect=(ARMED,), status="completed")
