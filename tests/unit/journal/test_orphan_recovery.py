"""Start-up recovery of orphaned ``started`` records (seed 000: orphans count as uncertain), set-based.

:meth:`Store.orphan_started_actions` marks every record a stopped instance left ``started`` in
one statement. Its results must be exactly those of recording each orphan's ``uncertain``
outcome one by one, as start-up did before (``finish_action(..., outcome="uncertain")`` with the
orphan's evidence): the same columns (outcome, detail, recovery state, escalation deadline, end
time; a remedy set while the call ran is kept), the same receipt entries, and nothing else
touched. Both are run on twin records in one database with a fixed clock and compared; on SQLite
and on PostgreSQL. (Start-up emits no run events for orphans; it logs each one.)
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from octipusd.store import Store
from octipusd.store.journal_store import ToolAction

START = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
RESTART = START + timedelta(minutes=5)
#: (deadline seconds, a remedy set while it ran, dispatch recorded, in-flight bound in seconds)
CASES: list[tuple[float, str | None, bool, float | None]] = [
    (60.0, None, False, None),
    (60.0, None, True, 30.0),
    (3600.0, None, False, 5.5),
    (1.5, "contained", False, None),
    (7.25, "recovering", True, None),
]


class _Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> _Clock:
    return _Clock()


@pytest.fixture
def store(migrated_store_url: str, clock: _Clock) -> Iterator[Store]:
    opened = Store.open(migrated_store_url, clock=clock)
    try:
        yield opened
    finally:
        opened.close()


def _start(store: Store, session_id: str, owner: str, case: int, *, outcome: str = "started") -> str:
    deadline, remedy, dispatch, in_flight = CASES[case]
    record = store.start_action(
        user="alice",
        session_id=session_id,
        run_id=None,
        agent="worker",
        origin="agent",
        tool="ledger.append",
        args_hash=f"{case:064d}",
        risk_class="compensatable",
        owner=owner,
        deadline_seconds=deadline,
        idempotency_key=f"key-{owner}-{case}" if case % 2 else None,
        recovery_owner="ops" if case % 2 else None,
        contract={"risk_class": "compensatable", "case": case},
        outcome=outcome,
        detail=None if outcome == "started" else "refused",
        in_flight_seconds=in_flight,
        dispatch={"transport": "http", "session": f"s-{case}"} if dispatch else None,
    )
    if remedy is not None:
        assert store.set_recovery_state(record.id, state=remedy, kind=remedy, data={"by": "bob"})
    return record.id


def _detail(owner: str) -> str:
    return f"orphaned: the daemon instance {owner} stopped before recording an outcome"


def _comparable(store: Store, action: ToolAction, owner: str) -> dict[str, Any]:
    """The record and its receipt with what differs between twins (ids, owner, key) left out."""
    view = action.to_dict()
    for name in ("id", "owner", "idempotency_key"):
        view.pop(name)
    view["detail"] = (view["detail"] or "").replace(owner, "OWNER")
    receipts = []
    for entry in store.list_receipts(action.id):
        data = dict(entry.data)
        if isinstance(data.get("detail"), str):
            data["detail"] = data["detail"].replace(owner, "OWNER")
        receipts.append((entry.kind, entry.state, data, entry.created_at))
    view["receipts"] = receipts
    return view


def test_orphans_are_marked_as_recording_each_outcome_one_by_one_did(store: Store, clock: _Clock) -> None:
    session = store.create_session(workspace="/tmp", adapter="claude-code").id
    bulk = [_start(store, session, "gone-a", case) for case in range(len(CASES))]
    single = [_start(store, session, "gone-b", case) for case in range(len(CASES))]
    own = _start(store, session, "daemon-new", 0)
    refused = _start(store, session, "gone-a", 1, outcome="not_executed")
    finished = _start(store, session, "gone-a", 2)
    clock.now = START + timedelta(seconds=1)
    assert store.finish_action(finished, outcome="completed", detail="exit 0", answered=True)
    untouched = {i: (store.get_action(i), store.list_receipts(i)) for i in (own, refused, finished)}

    clock.now = RESTART
    for action_id in single:  # what start-up did before: one outcome write per orphan
        assert store.finish_action(
            action_id, outcome="uncertain", detail=_detail("gone-b"), data={"orphan": True}
        )
    orphans = store.orphan_started_actions(owner="daemon-new")

    # the records changed, as they now are, oldest first
    assert sorted(a.id for a in orphans) == sorted(bulk)
    assert orphans == sorted((store.get_action(i) for i in bulk), key=lambda a: (a.started_at, a.id))
    for case, (a, b) in enumerate(zip(bulk, single, strict=True)):
        bulk_view = _comparable(store, store.get_action(a), "gone-a")
        assert bulk_view == _comparable(store, store.get_action(b), "gone-b"), CASES[case]
    # the cases themselves, spelled out
    marked = {a.id: a for a in orphans}
    for case, action_id in enumerate(bulk):
        deadline, remedy, _, _ = CASES[case]
        action = marked[action_id]
        assert action.outcome == "uncertain" and action.detail == _detail("gone-a")
        assert action.finished_at == RESTART and action.resolved is (remedy == "contained")
        if remedy is None:
            assert action.recovery_state == "effect_unconfirmed"
            assert action.deadline_at == RESTART + timedelta(seconds=deadline)
        else:
            assert action.recovery_state == remedy and action.deadline_at is None
        last = store.list_receipts(action_id)[-1]
        assert (last.kind, last.state, last.created_at) == (
            "outcome",
            None if remedy else "effect_unconfirmed",
            RESTART,
        )
        assert last.data == {"orphan": True, "outcome": "uncertain", "detail": _detail("gone-a")}
    # nothing else changed: this instance's record, finished ones
    for action_id, (action, receipts) in untouched.items():
        assert (store.get_action(action_id), store.list_receipts(action_id)) == (action, receipts)
    # exactly once: a second start-up finds nothing and writes nothing
    counts = {i: len(store.list_receipts(i)) for i in bulk}
    assert store.orphan_started_actions(owner="daemon-new") == []
    assert {i: len(store.list_receipts(i)) for i in bulk} == counts


def test_no_orphans_writes_nothing(store: Store) -> None:
    session = store.create_session(workspace="/tmp", adapter="claude-code").id
    own = _start(store, session, "daemon-new", 0)
    assert store.orphan_started_actions(owner="daemon-new") == []
    assert store.get_action(own).outcome == "started"
    assert [r.kind for r in store.list_receipts(own)] == ["contract"]
