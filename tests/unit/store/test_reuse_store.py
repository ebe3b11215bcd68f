"""Session reuse persistence (seed 003): vendor records, /clear generations, transcript,
checkpoints, child runs; on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from racing import race
from sqlmodel import SQLModel

from octipusd.errors import InvalidRequestError, NotFoundError, StoreError
from octipusd.store import Store, make_engine, upgrade
from octipusd.store.engine import WRITE_OPTION
from octipusd.store.migrate import alembic_config, current_revision, head_revision
from octipusd.store.records import Session, VendorSession
from octipusd.store.reuse_store import MAX_CHILD_SESSIONS, UNSET, KeptTurn, RootVendorSave

MISSING = "0" * 32
THREADS = 8


class FakeClock:
    """A settable UTC clock."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cstore(store_url: str, clock: FakeClock) -> Iterator[Store]:
    """A migrated store with a fake clock (SQLite and PostgreSQL)."""
    with Store.open(store_url, clock=clock) as opened:
        yield opened


def _session(store: Store) -> Session:
    return store.create_session(workspace="/w", adapter="claude-code")


def _save(
    store: Store, session_id: str, key: str = "claude-code", vid: str = "v1", **kw: Any
) -> VendorSession:
    saved = store.save_vendor_session(
        session_id=session_id, key=key, vendor_session_id=vid, fingerprint="f", cwd="/w", **kw
    )
    assert saved is not None
    return saved


# Vendor records and /clear ----------------------------------------------------------------


def test_save_records_cursor_generation_and_use_time(cstore: Store, clock: FakeClock) -> None:
    session = _session(cstore)
    first = _save(cstore, session.id, cursor=4)
    assert (first.cursor, first.clear_generation, first.checkpoint_id) == (4, 0, None)
    assert first.last_used_at == first.updated_at == first.created_at == clock.now
    clock.advance(30)
    again = _save(cstore, session.id, vid="v2", cursor=9, generation=0)
    assert again.id == first.id and again.created_at == first.created_at
    assert (again.vendor_session_id, again.cursor) == ("v2", 9)
    assert again.last_used_at == again.updated_at == clock.now
    assert cstore.get_vendor_session(session.id, "claude-code") == again
    assert cstore.get_vendor_session(MISSING, "claude-code") is None
    with pytest.raises(NotFoundError, match=MISSING):
        _save(cstore, MISSING)
    with pytest.raises(InvalidRequestError, match="cursor"):
        _save(cstore, session.id, cursor=-1)
    with pytest.raises(InvalidRequestError, match="max_children"):
        _save(cstore, session.id, max_children=0)


def test_clear_session_bumps_the_generation_and_drops_every_vendor_record(
    cstore: Store, clock: FakeClock
) -> None:
    session = _session(cstore)
    other = _session(cstore)
    assert (session.clear_generation, session.cleared_at) == (0, None)
    _save(cstore, session.id)
    _save(cstore, session.id, key="codex")
    _save(cstore, session.id, key="claude-code::root>coder:t1")
    kept = _save(cstore, other.id)
    clock.advance(5)
    cleared = cstore.clear_session(session.id)
    assert (cleared.clear_generation, cleared.cleared_at, cleared.updated_at) == (1, clock.now, clock.now)
    assert cstore.get_session(session.id) == cleared
    assert cstore.list_vendor_sessions(session.id) == []
    with cstore.engine.connect() as conn:  # deleted, not merely hidden as stale
        left = conn.execute(
            sa.text("SELECT COUNT(*) FROM vendor_sessions WHERE session_id = :id"), {"id": session.id}
        ).scalar_one()
    assert left == 0
    for key in ("claude-code", "codex", "claude-code::root>coder:t1"):
        assert cstore.get_vendor_session(session.id, key) is None
    assert cstore.get_vendor_session(other.id, "claude-code") == kept
    assert cstore.clear_session(session.id).clear_generation == 2
    with pytest.raises(NotFoundError, match=MISSING):
        cstore.clear_session(MISSING)


def test_an_old_turn_finishing_after_clear_stores_nothing(cstore: Store) -> None:
    session = _session(cstore)
    started_in = cstore.get_session(session.id).clear_generation
    _save(cstore, session.id, generation=started_in)
    cstore.clear_session(session.id)
    late = cstore.save_vendor_session(
        session_id=session.id,
        key="claude-code",
        vendor_session_id="late",
        fingerprint="f",
        cwd="/w",
        generation=started_in,
    )
    assert late is None
    assert cstore.list_vendor_sessions(session.id) == []
    assert cstore.get_vendor_session(session.id, "claude-code") is None
    fresh = _save(cstore, session.id, vid="new")  # generation None: the current one
    assert fresh.clear_generation == 1
    assert _save(cstore, session.id, vid="newer", generation=1).vendor_session_id == "newer"
    assert (
        cstore.save_vendor_session(
            session_id=session.id, key="x", vendor_session_id="v", fingerprint="f", cwd="/w", generation=7
        )
        is None
    )  # a generation from the future is not current either


def test_a_record_of_an_older_generation_is_stale(cstore: Store) -> None:
    """Defence in depth: even a record /clear did not delete is never handed out."""
    session = _session(cstore)
    _save(cstore, session.id)
    _save(cstore, session.id, key="codex")
    with cstore.engine.begin() as conn:
        conn.execute(sa.text("UPDATE sessions SET clear_generation = 3 WHERE id = :id"), {"id": session.id})
    assert cstore.get_vendor_session(session.id, "claude-code") is None
    assert cstore.list_vendor_sessions(session.id) == []
    # a conditional save treats the stale record as "no record"
    assert (
        cstore.save_vendor_session(
            session_id=session.id,
            key="claude-code",
            vendor_session_id="v9",
            fingerprint="f",
            cwd="/w",
            expect_vendor_session_id="v1",
        )
        is None
    )
    saved = _save(cstore, session.id, vid="v9", expect_vendor_session_id=None)
    assert saved.clear_generation == 3
    assert [v.key for v in cstore.list_vendor_sessions(session.id)] == ["claude-code"]


def test_list_vendor_sessions_orders_by_key(cstore: Store) -> None:
    session = _session(cstore)
    for key in ("codex", "claude-code::a>b:1", "claude-code"):
        _save(cstore, session.id, key=key)
    assert [v.key for v in cstore.list_vendor_sessions(session.id)] == [
        "claude-code",
        "claude-code::a>b:1",
        "codex",
    ]
    assert [v.is_child for v in cstore.list_vendor_sessions(session.id)] == [False, True, False]
    assert cstore.list_vendor_sessions(MISSING) == []


def test_conditional_save_writes_only_when_no_retry_took_the_key(cstore: Store) -> None:
    session = _session(cstore)
    key = "codex::root>coder:task-1"
    assert _save(cstore, session.id, key=key, vid="a", expect_vendor_session_id=None).vendor_session_id == "a"
    # "there must be no record": there is one now
    assert (
        cstore.save_vendor_session(
            session_id=session.id,
            key=key,
            vendor_session_id="b",
            fingerprint="f",
            cwd="/w",
            expect_vendor_session_id=None,
        )
        is None
    )
    # a retry took the key (holds "a", the child expected "x")
    assert (
        cstore.save_vendor_session(
            session_id=session.id,
            key=key,
            vendor_session_id="b",
            fingerprint="f",
            cwd="/w",
            expect_vendor_session_id="x",
        )
        is None
    )
    stored = cstore.get_vendor_session(session.id, key)
    assert stored is not None and stored.vendor_session_id == "a"
    assert _save(cstore, session.id, key=key, vid="b", expect_vendor_session_id="a").vendor_session_id == "b"
    assert (
        _save(cstore, session.id, key=key, vid="c", expect_vendor_session_id=UNSET).vendor_session_id == "c"
    )


def test_concurrent_conditional_saves_have_one_winner(store: Store) -> None:
    session = _session(store)

    def work(i: int) -> VendorSession | None:
        return store.save_vendor_session(
            session_id=session.id,
            key="claude-code::r>x:1",
            vendor_session_id=f"v{i}",
            fingerprint="f",
            cwd="/w",
            expect_vendor_session_id=None,
        )

    results = race(THREADS, work)
    assert not [r for r in results if isinstance(r, BaseException)], results
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert store.get_vendor_session(session.id, "claude-code::r>x:1") == winners[0]


def test_conditional_drop_keeps_a_replaced_record(cstore: Store) -> None:
    session = _session(cstore)
    key = "claude-code::root>coder:t"
    _save(cstore, session.id, key=key, vid="mine")
    _save(cstore, session.id, key=key, vid="retry")  # a retry replaced it
    assert cstore.drop_vendor_session(session.id, key, vendor_session_id="mine") is False
    stored = cstore.get_vendor_session(session.id, key)
    assert stored is not None and stored.vendor_session_id == "retry"
    assert cstore.drop_vendor_session(session.id, key, vendor_session_id="retry") is True
    assert cstore.get_vendor_session(session.id, key) is None
    _save(cstore, session.id, key=key, vid="any")
    assert cstore.drop_vendor_session(session.id, key) is True
    assert cstore.drop_vendor_session(session.id, key) is False


def test_child_records_are_pruned_least_recently_used_first(cstore: Store, clock: FakeClock) -> None:
    session = _session(cstore)
    other = _session(cstore)
    _save(cstore, session.id, key="claude-code")
    _save(cstore, session.id, key="codex")
    _save(cstore, other.id, key="codex::o>x:1")
    for i in range(MAX_CHILD_SESSIONS):
        clock.advance(1)
        _save(cstore, session.id, key=f"codex::root>coder:{i}")
    clock.advance(1)
    _save(cstore, session.id, key="codex::root>coder:0", vid="v-again")  # 0 is now the most recent
    keys = {v.key for v in cstore.list_vendor_sessions(session.id)}
    assert len(keys) == MAX_CHILD_SESSIONS + 2  # at the limit: nothing pruned yet
    clock.advance(1)
    _save(cstore, session.id, key="codex::root>coder:new")
    keys = {v.key for v in cstore.list_vendor_sessions(session.id)}
    children = {k for k in keys if "::" in k}
    assert len(children) == MAX_CHILD_SESSIONS
    assert "codex::root>coder:1" not in keys  # the least recently used went first
    assert {"codex::root>coder:0", "codex::root>coder:new", "claude-code", "codex"} <= keys
    # root records are never pruned, saving a root key prunes nothing, other sessions untouched
    _save(cstore, session.id, key="claude-code", vid="v2", max_children=1)
    assert len(cstore.list_vendor_sessions(session.id)) == MAX_CHILD_SESSIONS + 2
    assert len(cstore.list_vendor_sessions(other.id)) == 1


def test_pruning_never_removes_the_record_just_saved(cstore: Store, clock: FakeClock) -> None:
    session = _session(cstore)
    for i in range(3):
        clock.advance(60)
        _save(cstore, session.id, key=f"claude-code::r>c:{i}")
    clock.now -= timedelta(hours=1)  # the new record is the oldest by time
    saved = _save(cstore, session.id, key="claude-code::r>c:late", max_children=2)
    keys = [v.key for v in cstore.list_vendor_sessions(session.id)]
    assert keys == ["claude-code::r>c:2", "claude-code::r>c:late"]
    assert cstore.get_vendor_session(session.id, saved.key) == saved


# Transcript ---------------------------------------------------------------------------------


def test_messages_get_increasing_seqs_across_generations(cstore: Store, clock: FakeClock) -> None:
    session = _session(cstore)
    run = cstore.create_run(session_id=session.id, prompt="p", owner="o")
    first = cstore.append_message(session.id, role="user", text="hello", run_id=run.id)
    assert first is not None
    assert (first.seq, first.role, first.text, first.run_id, first.adapter, first.clear_generation) == (
        1,
        "user",
        "hello",
        run.id,
        None,
        0,
    )
    assert first.created_at == clock.now
    answer = cstore.append_message(session.id, role="assistant", text="hi", adapter="codex", generation=0)
    assert answer is not None and (answer.seq, answer.adapter) == (2, "codex")
    assert cstore.append_message(session.id, role="user", text="more") is not None
    cstore.clear_session(session.id)
    assert cstore.append_message(session.id, role="assistant", text="late", generation=0) is None
    after = [cstore.append_message(session.id, role="user", text=f"n{i}") for i in range(2)]
    assert [(m.seq, m.clear_generation) for m in after if m is not None] == [(4, 1), (5, 1)]
    old = cstore.list_messages(session.id, generation=0)
    assert [m.seq for m in old] == [1, 2, 3] and old[0] == first
    assert [m.text for m in cstore.list_messages(session.id, generation=1)] == ["n0", "n1"]
    assert [m.seq for m in cstore.list_messages(session.id, generation=0, after_seq=1)] == [2, 3]
    assert [m.seq for m in cstore.list_messages(session.id, generation=0, after_seq=1, through_seq=2)] == [2]
    assert cstore.list_messages(session.id, generation=2) == []
    assert cstore.list_messages(MISSING, generation=0) == []
    other = _session(cstore)
    other_first = cstore.append_message(other.id, role="user", text="x")
    assert other_first is not None and other_first.seq == 1


def test_a_root_turn_keeps_its_answer_and_vendor_session_in_one_transaction(cstore: Store) -> None:
    session = _session(cstore)
    user = cstore.append_message(session.id, role="user", text="q")
    assert user is not None
    run = cstore.create_run(session_id=session.id, prompt="q", owner="me")
    vendor = RootVendorSave(
        key="claude-code",
        vendor_session_id="v1",
        fingerprint="f",
        cwd="/w",
        cursor=user.seq,
        checkpoint_id=None,
    )
    kept = cstore.save_root_turn(
        session.id,
        generation=0,
        run_id=run.id,
        adapter="claude-code",
        answer="a",
        vendor=vendor,
        measure=True,
    )
    message, saved = kept.message, kept.vendor_session
    assert kept.uncovered_chars == cstore.uncovered_chars(session.id) == 2  # "q" and "a"
    assert message is not None and (message.seq, message.role, message.run_id) == (2, "assistant", run.id)
    assert saved is not None and saved.cursor == message.seq  # the answer is seen by the vendor
    # no answer: the record's cursor is the one given; no vendor session: only the answer
    unanswered = cstore.save_root_turn(
        session.id, generation=0, run_id=run.id, adapter="claude-code", answer=None, vendor=vendor
    ).vendor_session
    assert unanswered is not None and unanswered.cursor == user.seq
    only = cstore.save_root_turn(
        session.id, generation=0, run_id=run.id, adapter="claude-code", answer="b", vendor=None
    )
    assert only.message is not None and only.message.seq == 3
    assert only.vendor_session is None and only.uncovered_chars is None  # not measured
    cstore.clear_session(session.id)  # a turn of the old generation keeps nothing
    assert cstore.save_root_turn(
        session.id, generation=0, run_id=run.id, adapter="claude-code", answer="c", vendor=vendor
    ) == KeptTurn(None, None, None)
    assert [m.seq for m in cstore.list_messages(session.id, generation=0)] == [1, 2, 3]
    assert cstore.list_vendor_sessions(session.id) == []
    # both or neither: a failing save leaves no answer behind
    with pytest.raises(InvalidRequestError, match="not a checkpoint"):
        cstore.save_root_turn(
            session.id,
            generation=1,
            run_id=run.id,
            adapter="claude-code",
            answer="d",
            vendor=RootVendorSave("claude-code", "v2", "f", "/w", 0, checkpoint_id=12345),
        )
    assert cstore.list_messages(session.id, generation=1) == []


def test_the_start_of_a_turn_reads_its_session_row_and_root_reuse_records_at_once(cstore: Store) -> None:
    row = cstore.create_model_row(name="row", adapter="claude-code")
    session = cstore.create_session(workspace="/w", adapter="claude-code", model_row_id=row.id)
    _save(cstore, session.id, vid="old")
    _save(cstore, session.id, key="claude-code::root>coding:t1", vid="child")
    bare = cstore.read_turn(session.id, generation=None)  # a child run: no reuse records
    assert (bare.session, bare.model_row) == (cstore.get_session(session.id), row)
    assert (bare.vendor_session, bare.checkpoint) == (None, None)
    for n in range(2):
        cstore.append_message(session.id, role="user", text=f"q{n}")
    first = cstore.publish_checkpoint(
        session.id, generation=0, first_seq=1, through_seq=1, summary="s", covered_chars=2, rotate_keys=[]
    )
    latest = cstore.publish_checkpoint(
        session.id, generation=0, first_seq=1, through_seq=2, summary="s", covered_chars=4, rotate_keys=[]
    )
    assert first is not None and latest is not None
    turn = cstore.read_turn(session.id, generation=0)
    assert turn.vendor_session == cstore.get_vendor_session(session.id, "claude-code")
    assert turn.vendor_session is not None and turn.vendor_session.vendor_session_id == "old"
    assert turn.checkpoint == cstore.latest_checkpoint(session.id, 0) == latest
    cstore.clear_session(session.id)  # the old generation's record is stale; its checkpoints stay its own
    cleared = cstore.read_turn(session.id, generation=1)
    assert (cleared.vendor_session, cleared.checkpoint) == (None, None)
    cstore.delete_model_row(row.id)  # the session keeps its copy
    assert cstore.read_turn(session.id, generation=1).model_row is None
    with pytest.raises(NotFoundError, match=f"session {MISSING} not found"):
        cstore.read_turn(MISSING, generation=0)


def test_append_message_checks_its_arguments(cstore: Store) -> None:
    session = _session(cstore)
    other = _session(cstore)
    foreign = cstore.create_run(session_id=other.id, prompt="p", owner="o")
    with pytest.raises(InvalidRequestError, match="role"):
        cstore.append_message(session.id, role="system", text="x")
    with pytest.raises(InvalidRequestError, match="belongs to session"):
        cstore.append_message(session.id, role="user", text="x", run_id=foreign.id)
    with pytest.raises(NotFoundError, match=MISSING):
        cstore.append_message(session.id, role="user", text="x", run_id=MISSING)
    with pytest.raises(NotFoundError, match=MISSING):
        cstore.append_message(MISSING, role="user", text="x")
    assert cstore.list_messages(session.id, generation=0) == []


def test_concurrent_appends_get_distinct_seqs(store: Store) -> None:
    session = _session(store)
    per_thread = 5

    def work(i: int) -> list[int]:
        seqs = []
        for n in range(per_thread):
            message = store.append_message(session.id, role="user", text=f"{i}-{n}")
            assert message is not None
            seqs.append(message.seq)
        return seqs

    results = race(THREADS, work)
    for result in results:
        assert isinstance(result, list), result
        assert result == sorted(result)
    seqs = [seq for result in results for seq in result]  # type: ignore[union-attr]
    assert sorted(seqs) == list(range(1, THREADS * per_thread + 1))
    assert [m.seq for m in store.list_messages(session.id, generation=0)] == sorted(seqs)


# Checkpoints ---------------------------------------------------------------------------------


def _publish(store: Store, session_id: str, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "generation": 0,
        "first_seq": 1,
        "through_seq": 2,
        "summary": "s",
        "covered_chars": 10,
        "rotate_keys": (),
    }
    args.update(kw)
    return store.publish_checkpoint(session_id, **args)


def test_checkpoints_only_move_forward_within_a_generation(cstore: Store, clock: FakeClock) -> None:
    session = _session(cstore)
    assert cstore.latest_checkpoint(session.id, 0) is None
    first = _publish(cstore, session.id, through_seq=4, summary="first", covered_chars=120)
    assert (first.session_id, first.clear_generation, first.first_seq, first.through_seq) == (
        session.id,
        0,
        1,
        4,
    )
    assert (first.summary, first.covered_chars, first.created_at) == ("first", 120, clock.now)
    assert cstore.latest_checkpoint(session.id, 0) == first
    for through in (4, 3):
        with pytest.raises(InvalidRequestError, match="already covers through seq 4"):
            _publish(cstore, session.id, through_seq=through)
    with pytest.raises(InvalidRequestError, match="before first_seq"):
        _publish(cstore, session.id, first_seq=6, through_seq=5)
    with pytest.raises(InvalidRequestError, match="first_seq"):
        _publish(cstore, session.id, first_seq=0)
    with pytest.raises(InvalidRequestError, match="covered_chars"):
        _publish(cstore, session.id, through_seq=9, covered_chars=-1)
    second = _publish(cstore, session.id, first_seq=1, through_seq=8)
    assert cstore.latest_checkpoint(session.id, 0) == second
    with pytest.raises(NotFoundError, match=MISSING):
        _publish(cstore, MISSING)
    assert cstore.latest_checkpoint(MISSING, 0) is None
    # a new generation starts its own sequence of checkpoints
    cstore.clear_session(session.id)
    assert _publish(cstore, session.id, generation=0, through_seq=20) is None  # stale
    assert cstore.latest_checkpoint(session.id, 0) == second
    assert cstore.latest_checkpoint(session.id, 1) is None
    third = _publish(cstore, session.id, generation=1, first_seq=9, through_seq=10)
    assert cstore.latest_checkpoint(session.id, 1) == third


def test_publication_rotates_root_records_and_keeps_child_records(cstore: Store) -> None:
    session = _session(cstore)
    other = _session(cstore)
    for key in ("claude-code", "codex", "gemini", "claude-code::root>coder:1", "codex::root>qa:2"):
        _save(cstore, session.id, key=key)
    _save(cstore, other.id, key="claude-code")
    checkpoint = _publish(cstore, session.id, rotate_keys=["claude-code", "codex"])
    assert checkpoint is not None
    assert [v.key for v in cstore.list_vendor_sessions(session.id)] == [
        "claude-code::root>coder:1",
        "codex::root>qa:2",
        "gemini",
    ]
    assert cstore.get_vendor_session(other.id, "claude-code") is not None
    with pytest.raises(InvalidRequestError, match="child keys"):
        _publish(cstore, session.id, through_seq=3, rotate_keys=["gemini", "codex::root>qa:2"])
    with pytest.raises(InvalidRequestError, match="one string"):
        _publish(cstore, session.id, through_seq=3, rotate_keys="gemini")
    assert len(cstore.list_vendor_sessions(session.id)) == 3  # refused publications rotate nothing
    with pytest.raises(InvalidRequestError):
        _publish(cstore, session.id, through_seq=2, rotate_keys=["gemini"])  # out of order
    assert cstore.get_vendor_session(session.id, "gemini") is not None


def test_a_stale_publication_rotates_nothing(cstore: Store) -> None:
    session = _session(cstore)
    cstore.clear_session(session.id)
    _save(cstore, session.id)
    assert _publish(cstore, session.id, generation=0, rotate_keys=["claude-code"]) is None
    assert cstore.get_vendor_session(session.id, "claude-code") is not None
    assert cstore.latest_checkpoint(session.id, 0) is None


def test_checkpoint_and_rotation_commit_together(cstore: Store) -> None:
    """A failure while rotating rolls the checkpoint back too."""
    session = _session(cstore)
    _save(cstore, session.id)

    def fail_rotation(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE FROM VENDOR_SESSIONS"):
            raise RuntimeError("injected failure while rotating")

    sa.event.listen(cstore.engine, "before_cursor_execute", fail_rotation)
    try:
        with pytest.raises((StoreError, RuntimeError)):
            _publish(cstore, session.id, rotate_keys=["claude-code"])
    finally:
        sa.event.remove(cstore.engine, "before_cursor_execute", fail_rotation)
    assert cstore.latest_checkpoint(session.id, 0) is None
    assert cstore.get_vendor_session(session.id, "claude-code") is not None
    assert _publish(cstore, session.id, rotate_keys=["claude-code"]) is not None
    assert cstore.get_vendor_session(session.id, "claude-code") is None


def test_a_cold_start_records_the_checkpoint_it_carried(cstore: Store) -> None:
    session = _session(cstore)
    other = _session(cstore)
    checkpoint = _publish(cstore, session.id, through_seq=6)
    saved = _save(cstore, session.id, cursor=8, checkpoint_id=checkpoint.id)
    assert saved.checkpoint_id == checkpoint.id
    assert cstore.get_vendor_session(session.id, "claude-code") == saved
    foreign = _publish(cstore, other.id)
    with pytest.raises(InvalidRequestError, match="not a checkpoint of session"):
        _save(cstore, session.id, checkpoint_id=foreign.id)
    with pytest.raises(InvalidRequestError, match="not a checkpoint of session"):
        _save(cstore, session.id, checkpoint_id=987654)
    cstore.clear_session(session.id)
    stale = cstore.save_vendor_session(
        session_id=session.id,
        key="claude-code",
        vendor_session_id="v",
        fingerprint="f",
        cwd="/w",
        checkpoint_id=checkpoint.id,
    )
    assert stale is None  # a checkpoint of an older generation: nothing stored
    assert cstore.list_vendor_sessions(session.id) == []


# Child runs -------------------------------------------------------------------------------------


def test_child_runs_record_parent_role_and_resume_key(cstore: Store) -> None:
    session = _session(cstore)
    other = _session(cstore)
    root = cstore.create_run(session_id=session.id, prompt="root", owner="o")
    assert (root.parent_run_id, root.role, root.resume_key) == (None, None, None)
    child = cstore.create_run(
        session_id=session.id,
        prompt="brief",
        owner="o",
        parent_run_id=root.id,
        role="coder",
        resume_key="task-1",
    )
    assert child.turn_index == 2
    assert (child.parent_run_id, child.role, child.resume_key) == (root.id, "coder", "task-1")
    assert cstore.get_run(child.id) == child
    assert cstore.create_run(session_id=session.id, prompt="next", owner="o").turn_index == 3
    with pytest.raises(NotFoundError, match=MISSING):
        cstore.create_run(session_id=session.id, prompt="x", owner="o", parent_run_id=MISSING)
    with pytest.raises(InvalidRequestError, match="belongs to session"):
        cstore.create_run(session_id=other.id, prompt="x", owner="o", parent_run_id=root.id)


# Deletion -------------------------------------------------------------------------------------


def test_delete_session_removes_transcript_checkpoints_and_child_runs(cstore: Store) -> None:
    session = _session(cstore)
    other = _session(cstore)
    root = cstore.create_run(session_id=session.id, prompt="root", owner="o")
    child = cstore.create_run(session_id=session.id, prompt="c", owner="o", parent_run_id=root.id, role="qa")
    for run in (root, child):
        cstore.finish_run(run.id, status="succeeded")
    cstore.append_message(session.id, role="user", text="q", run_id=root.id)
    cstore.append_message(session.id, role="assistant", text="a", run_id=child.id)
    checkpoint = _publish(cstore, session.id)
    _save(cstore, session.id, checkpoint_id=checkpoint.id)
    _save(cstore, session.id, key="codex::root>qa:1")
    cstore.append_message(other.id, role="user", text="kept")
    kept_checkpoint = _publish(cstore, other.id, through_seq=1)
    cstore.delete_session(session.id)
    with pytest.raises(NotFoundError):
        cstore.get_session(session.id)
    assert cstore.list_messages(session.id, generation=0) == []
    assert cstore.latest_checkpoint(session.id, 0) is None
    assert cstore.list_vendor_sessions(session.id) == []
    with pytest.raises(NotFoundError):
        cstore.get_run(child.id)
    with cstore.engine.connect() as conn:
        for table in ("session_messages", "session_checkpoints", "vendor_sessions", "runs"):
            count = conn.execute(
                sa.text(f"SELECT COUNT(*) FROM {table} WHERE session_id = :id"), {"id": session.id}
            ).scalar_one()
            assert count == 0, table
    assert [m.text for m in cstore.list_messages(other.id, generation=0)] == ["kept"]
    assert cstore.latest_checkpoint(other.id, 0) == kept_checkpoint


# Migration ------------------------------------------------------------------------------------


def _downgrade(engine: sa.Engine, revision: str) -> None:
    config = alembic_config()
    with engine.connect() as conn:
        conn.execution_options(**{WRITE_OPTION: True})
        with conn.begin():
            config.attributes["connection"] = conn
            command.downgrade(config, revision)


def test_upgrade_from_0004_keeps_rows_and_reuses_old_records(store_url: str) -> None:
    engine = make_engine(store_url)
    sid, rid = "a" * 32, "b" * 32
    try:
        upgrade(engine, "0004")
        now = datetime(2031, 1, 1, tzinfo=UTC)
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO sessions (id, workspace, adapter, permission_mode, attended, created_at, "
                    "updated_at, options) VALUES (:id, '/w', 'claude-code', 'workspace', true, :now, :now, '{}')"
                ),
                {"id": sid, "now": now},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO runs (id, session_id, turn_index, status, prompt, resumed, input_tokens, "
                    "output_tokens, cache_creation_input_tokens, cache_read_input_tokens, usage_estimated, "
                    "owner, created_at) VALUES (:id, :sid, 1, 'succeeded', 'p', false, 0, 0, 0, 0, false, "
                    "'o', :now)"
                ),
                {"id": rid, "sid": sid, "now": now},
            )
            for key, vid in (("claude-code", "v-root"), ("codex::root>coder:1", "v-child")):
                conn.execute(
                    sa.text(
                        'INSERT INTO vendor_sessions (session_id, "key", vendor_session_id, fingerprint, cwd, '
                        "clear_generation, created_at, updated_at) VALUES (:sid, :key, :vid, 'f', '/w', 0, "
                        ":now, :now)"
                    ),
                    {"sid": sid, "key": key, "vid": vid, "now": now},
                )
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert list(compare_metadata(context, SQLModel.metadata)) == []
        store = Store(engine)
        session = store.get_session(sid)
        assert (session.clear_generation, session.cleared_at) == (0, None)
        run = store.get_run(rid)
        assert (run.parent_run_id, run.role, run.resume_key) == (None, None, None)
        root = store.get_vendor_session(sid, "claude-code")
        assert root is not None and root.vendor_session_id == "v-root"
        assert (root.cursor, root.checkpoint_id, root.clear_generation) == (0, None, 0)
        assert root.last_used_at == root.updated_at
        assert [v.key for v in store.list_vendor_sessions(sid)] == ["claude-code", "codex::root>coder:1"]
        # the new tables work on the migrated database
        message = store.append_message(sid, role="user", text="after the upgrade", run_id=rid)
        assert message is not None and message.seq == 1
        checkpoint = store.publish_checkpoint(
            sid, generation=0, first_seq=1, through_seq=1, summary="s", covered_chars=17, rotate_keys=[]
        )
        assert checkpoint is not None
        assert _save(store, sid, checkpoint_id=checkpoint.id, cursor=1).checkpoint_id == checkpoint.id
        child = store.create_run(session_id=sid, prompt="c", owner="o", parent_run_id=rid, role="coder")
        assert child.turn_index == 2
        # down to 0004 (the new data is lost, the old rows stay) and up again
        _downgrade(engine, "0004")
        assert current_revision(engine) == "0004"
        tables = set(sa.inspect(engine).get_table_names())
        assert not {"session_messages", "session_checkpoints"} & tables
        assert "clear_generation" not in {c["name"] for c in sa.inspect(engine).get_columns("sessions")}
        upgrade(engine)
        assert Store(engine).get_session(sid).workspace == "/w"
        again = Store(engine).get_vendor_session(sid, "claude-code")
        assert again is not None and again.vendor_session_id == "v1" and again.cursor == 0
    finally:
        engine.dispose()
