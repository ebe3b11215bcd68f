"""Schedules and the slots they fired (issue 28 item 8), on SQLite and PostgreSQL: a slot is claimed
once and started once, even by two claimers at the same moment."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from octipusd.errors import NotFoundError
from octipusd.store import Store
from octipusd.store.schedule_records import FiringStatus, ScheduleKind, ScheduleStatus

SLOT = datetime(2026, 12, 8, 7, 0, tzinfo=UTC)


def _schedule(store: Store, user: str = "ann") -> str:
    return store.create_schedule(
        user=user,
        cron="0 7 * * 1-5",
        kind=ScheduleKind.PROMPT,
        session_id=None,
        workspace="/w",
        prompt="the nightly check",
        pipeline=None,
        params={},
    ).id


def test_a_schedule_is_stored_listed_paused_resumed_and_removed_with_its_firings(store: Store) -> None:
    sid = _schedule(store)
    _schedule(store, user="bob")
    created = store.get_schedule(sid)
    assert (
        created.status is ScheduleStatus.ACTIVE and created.workspace == "/w" and created.last_slot_at is None
    )
    assert [s.id for s in store.list_schedules(user="ann")] == [sid]
    assert store.has_active_schedules()

    paused = store.set_schedule_status(sid, ScheduleStatus.PAUSED)
    assert paused.status is ScheduleStatus.PAUSED and paused.active_since == created.active_since
    assert [s.id for s in store.list_schedules(status=ScheduleStatus.PAUSED)] == [sid]
    resumed = store.set_schedule_status(sid, ScheduleStatus.ACTIVE)
    assert resumed.active_since is not None and created.active_since is not None
    assert resumed.active_since > created.active_since  # slots paused over are never caught up
    again = store.set_schedule_status(sid, ScheduleStatus.ACTIVE)
    assert again.active_since == resumed.active_since

    assert store.claim_slot(sid, SLOT) is not None
    store.delete_schedule(sid)
    with pytest.raises(NotFoundError, match="schedule"):
        store.get_schedule(sid)
    assert store.list_firings(sid) == []
    with pytest.raises(NotFoundError):
        store.claim_slot(sid, SLOT)


def test_a_slot_is_claimed_once_and_started_once(store: Store) -> None:
    sid = _schedule(store)
    first = store.claim_slot(sid, SLOT, caught_up=True)
    assert first is not None and first.status is FiringStatus.CLAIMED and first.caught_up
    assert store.claim_slot(sid, SLOT) is None
    assert store.get_schedule(sid).last_slot_at == SLOT
    earlier = store.claim_slot(sid, SLOT - timedelta(days=1))
    assert earlier is not None and store.get_schedule(sid).last_slot_at == SLOT  # never moves back
    assert [f.id for f in store.claimed_firings()] == [earlier.id, first.id]

    started = store.begin_firing(first.id)
    assert started is not None and started.status is FiringStatus.STARTING
    assert store.begin_firing(first.id) is None  # a replayed workflow starts nothing
    done = store.finish_firing(
        first.id, FiringStatus.STARTED, session_id="s" * 32, run_id="r" * 32, delivery="turn"
    )
    assert (done.status, done.run_id, done.delivery) == (FiringStatus.STARTED, "r" * 32, "turn")
    assert [f.slot_at for f in store.list_firings(sid)] == [SLOT, SLOT - timedelta(days=1)]


def test_firings_a_stopped_daemon_was_starting_fail_and_never_start(store: Store) -> None:
    sid = _schedule(store)
    firing = store.claim_slot(sid, SLOT)
    assert firing is not None and store.begin_firing(firing.id) is not None
    (failed,) = store.fail_starting_firings("octipusd stopped")
    assert (
        failed.id == firing.id and failed.status is FiringStatus.FAILED and failed.error == "octipusd stopped"
    )
    assert store.begin_firing(firing.id) is None
    assert store.fail_starting_firings("again") == []


def test_two_claimers_of_one_slot_at_once_get_one_firing(store: Store) -> None:
    sid = _schedule(store)
    barrier = threading.Barrier(2)
    won: list[bool] = []

    def claim() -> None:
        barrier.wait()
        won.append(store.claim_slot(sid, SLOT) is not None)

    threads = [threading.Thread(target=claim) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won) == [False, True]
    assert len(store.list_firings(sid)) == 1
