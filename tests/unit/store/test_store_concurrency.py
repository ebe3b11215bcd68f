"""Atomicity under concurrent callers (threads), on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from racing import race

from octipusd.errors import ApprovalError
from octipusd.store import ApprovalStatus, RunStatus, Store

THREADS = 8


def test_concurrent_create_run_gets_distinct_turn_indexes(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code")
    per_thread = 5

    def work(i: int) -> list[int]:
        return [
            store.create_run(session_id=session.id, prompt=f"{i}-{n}", owner="me").turn_index
            for n in range(per_thread)
        ]

    results = race(THREADS, work)
    indexes = [index for result in results for index in result]  # type: ignore[union-attr]
    assert sorted(indexes) == list(range(1, THREADS * per_thread + 1))
    stored = store.list_runs(session_id=session.id, limit=1000)
    assert sorted(r.turn_index for r in stored) == list(range(1, THREADS * per_thread + 1))


def test_concurrent_append_event_gets_gap_free_seqs(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code")
    run = store.create_run(session_id=session.id, prompt="p", owner="me")
    per_thread = 10

    def work(i: int) -> list[int]:
        return [store.append_event(run.id, "text", {"thread": i, "n": n}).seq for n in range(per_thread)]

    results = race(THREADS, work)
    for result in results:
        assert isinstance(result, list), result
        assert result == sorted(result)  # each thread sees its own events in order
    seqs = [seq for result in results for seq in result]  # type: ignore[union-attr]
    assert sorted(seqs) == list(range(1, THREADS * per_thread + 1))
    events = store.list_events(run.id)
    assert [e.seq for e in events] == list(range(1, THREADS * per_thread + 1))


@pytest.mark.parametrize("attempt", range(5))
def test_decide_approval_race_has_exactly_one_winner(store: Store, attempt: int) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code")
    run = store.create_run(session_id=session.id, prompt="p", owner="me")
    approval = store.create_approval(
        run_id=run.id,
        session_id=session.id,
        tool_id="cli-native:Bash",
        subject="make deploy",
        reason=None,
        input={"command": "make deploy"},
        explanation=None,
        vendor_request_id=None,
        expires_at=None,
    )
    people = ["alice", "bob"]

    def work(i: int) -> ApprovalStatus:
        return store.decide_approval(approval.id, approve=(i == 0), decided_by=people[i]).status

    results = race(2, work)
    winners = [r for r in results if isinstance(r, ApprovalStatus)]
    losers = [r for r in results if isinstance(r, ApprovalError)]
    assert len(winners) == 1 and len(losers) == 1, results
    final = store.get_approval(approval.id)
    assert final.status is winners[0]
    assert f"already {final.status.value} by {final.decided_by} at " in str(losers[0])


def test_finish_run_race_first_terminal_status_wins(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code")
    run = store.create_run(session_id=session.id, prompt="p", owner="me")
    statuses = [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.INTERRUPTED]

    results = race(len(statuses), lambda i: store.finish_run(run.id, status=statuses[i], reason=str(i)))
    finals = {r.status for r in results if not isinstance(r, BaseException)}
    assert len(finals) == 1, results  # every caller sees the one winning status
    final = store.get_run(run.id)
    assert final.status in finals
    assert final.reason == str(statuses.index(final.status))


def test_concurrent_vendor_session_saves_keep_one_row(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code")

    def work(i: int) -> int:
        saved = store.save_vendor_session(
            session_id=session.id, key="claude-code", vendor_session_id=f"v{i}", fingerprint="f", cwd="/w"
        )
        assert saved is not None
        return saved.id

    results = race(THREADS, work)
    assert all(isinstance(r, int) for r in results), results
    assert len(set(results)) == 1


def test_in_memory_sqlite_store_is_thread_safe() -> None:
    with Store.open("sqlite://") as store:
        session = store.create_session(workspace="/w", adapter="claude-code")
        run = store.create_run(session_id=session.id, prompt="p", owner="me")

        def work(i: int) -> int:
            for n in range(20):
                store.append_event(run.id, "text", {"n": n})
                store.list_events(run.id, limit=5)
            return i

        results = race(THREADS, work)
        assert results == list(range(THREADS))
        assert len(store.list_events(run.id, limit=10_000)) == THREADS * 20
