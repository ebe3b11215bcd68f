"""Store behaviour, on SQLite and PostgreSQL."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy.engine import make_url

from octipusd.errors import ApprovalError, ConflictError, InvalidRequestError, NotFoundError, StoreError
from octipusd.store import Approval, ApprovalStatus, Run, RunStatus, Store

MISSING = "0" * 32


class FakeClock:
    """A settable UTC clock."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _run(store: Store, owner: str = "daemon-a") -> Run:
    session = store.create_session(workspace="/work/project", adapter="claude-code")
    return store.create_run(session_id=session.id, prompt="do it", owner=owner)


def _approval(store: Store, run: Run, expires_at: datetime | None = None) -> Approval:
    return store.create_approval(
        run_id=run.id,
        session_id=run.session_id,
        tool_id="cli-native:Bash",
        subject="rm -rf build",
        reason="deletes files",
        input={"command": "rm -rf build"},
        explanation="rule: Bash(rm *) -> ask",
        vendor_request_id="req-1",
        expires_at=expires_at,
    )


# Sessions ---------------------------------------------------------------------------------


def test_create_get_list_touch_sessions(store_url: str) -> None:
    clock = FakeClock()
    with Store.open(store_url, clock=clock) as store:
        first = store.create_session(workspace="/w/one", adapter="claude-code")
        clock.advance(1)
        second = store.create_session(
            workspace="/w/two",
            adapter="codex",
            title="Refactor",
            model="gpt-5",
            permission_mode="read-only",
            attended=False,
        )
        assert len(first.id) == 32 and int(first.id, 16) >= 0
        assert first.permission_mode == "workspace" and first.attended is True
        assert first.title is None and first.model is None
        assert store.get_session(second.id) == second
        assert second.created_at == clock.now and second.created_at.tzinfo is not None
        assert [s.id for s in store.list_sessions()] == [second.id, first.id]
        assert [s.id for s in store.list_sessions(limit=1)] == [second.id]
        clock.advance(5)
        touched = store.touch_session(first.id)
        assert touched.updated_at == clock.now
        assert touched.created_at == first.created_at


def test_session_arguments_are_checked(store: Store) -> None:
    with pytest.raises(InvalidRequestError, match="absolute"):
        store.create_session(workspace="relative/path", adapter="claude-code")
    with pytest.raises(InvalidRequestError, match="limit"):
        store.list_sessions(limit=0)


def test_missing_records_raise_not_found_naming_the_id(store: Store) -> None:
    for call in (
        lambda: store.get_session(MISSING),
        lambda: store.touch_session(MISSING),
        lambda: store.get_run(MISSING),
        lambda: store.update_run(MISSING, pid=1),
        lambda: store.finish_run(MISSING, status=RunStatus.FAILED),
        lambda: store.create_run(session_id=MISSING, prompt="p", owner="o"),
        lambda: store.append_event(MISSING, "text", {}),
        lambda: store.list_events(MISSING),
        lambda: store.get_approval(MISSING),
        lambda: store.decide_approval(MISSING, approve=True, decided_by="alice"),
        lambda: store.resolve_approval_if_pending(MISSING, status=ApprovalStatus.EXPIRED, reason=None),
        lambda: store.save_vendor_session(
            session_id=MISSING, key="claude-code", vendor_session_id="v", fingerprint="f", cwd="/w"
        ),
        lambda: store.save_work_plan(MISSING, {}),
    ):
        with pytest.raises(NotFoundError, match=MISSING):
            call()


def test_data_is_durable_across_reopen(store_url: str) -> None:
    with Store.open(store_url) as store:
        run = _run(store)
        store.append_event(run.id, "text", {"text": "héllo \u0000 ✓"})
    with Store.open(store_url) as store:
        assert store.get_run(run.id) == run
        assert store.list_events(run.id)[0].data == {"text": "héllo \u0000 ✓"}


def test_closed_store_refuses_calls(store_url: str) -> None:
    store = Store.open(store_url)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.list_sessions()


def test_a_database_failure_names_the_call_not_the_database(
    migrated_store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 26 item 6: the message is shown to people (an API body, a page, a run's error); the
    database's URL, password, socket and file, and the driver's own text, are logged instead."""
    url = make_url(migrated_store_url)
    if url.get_backend_name() != "sqlite":
        url = url.set(password="store-pw-3c1d")
    given = url.render_as_string(hide_password=False)
    with Store.open(given) as store:
        session = store.create_session(workspace="/work/project", adapter="claude-code")
        with store.engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE work_plans RENAME TO work_plans_gone")
        caplog.set_level(logging.WARNING, logger="octipusd.store")
        with pytest.raises(StoreError) as failed:
            store.read_plan(session.id)
    message = failed.value.message
    kind = "OperationalError" if url.get_backend_name() == "sqlite" else "UndefinedTable"
    assert message == (
        f"database error while reading the work plan and feedback of session {session.id}: {kind}; "
        "the octipusd log has the details"
    )
    [record] = [r for r in caplog.records if r.name == "octipusd.store"]
    assert record.exc_info is not None and "work_plans" in record.getMessage()
    assert str(url.database) in record.getMessage() and "store-pw-3c1d" not in caplog.text


# Runs -------------------------------------------------------------------------------------


def test_create_get_list_runs(store_url: str) -> None:
    clock = FakeClock()
    with Store.open(store_url, clock=clock) as store:
        session = store.create_session(workspace="/w", adapter="claude-code")
        other = store.create_session(workspace="/w2", adapter="claude-code")
        runs = []
        for i in range(3):
            clock.advance(1)
            runs.append(store.create_run(session_id=session.id, prompt=f"turn {i}", owner="me"))
        other_run = store.create_run(session_id=other.id, prompt="x", owner="me")
        assert [r.turn_index for r in runs] == [1, 2, 3]
        assert other_run.turn_index == 1
        run = runs[0]
        assert run.status is RunStatus.QUEUED
        assert (run.input_tokens, run.output_tokens, run.cost_usd, run.resumed) == (0, 0, None, False)
        assert run.started_at is None and run.ended_at is None
        assert store.get_run(run.id) == run
        assert store.get_session(session.id).updated_at == runs[-1].created_at
        assert [r.id for r in store.list_runs(session_id=session.id)] == [r.id for r in reversed(runs)]
        assert len(store.list_runs()) == 4
        assert len(store.list_runs(limit=2)) == 2
        store.update_run(runs[1].id, status=RunStatus.RUNNING)
        assert [r.id for r in store.list_runs(statuses=["running"])] == [runs[1].id]
        assert {r.id for r in store.list_runs(statuses=[RunStatus.QUEUED], session_id=session.id)} == {
            runs[0].id,
            runs[2].id,
        }
        assert store.list_runs(session_id=MISSING) == []
        with pytest.raises(InvalidRequestError):
            store.list_runs(statuses=["bogus"])


def test_update_run(store: Store) -> None:
    run = _run(store)
    started = datetime(2030, 5, 1, 8, 30, tzinfo=UTC)
    updated = store.update_run(
        run.id,
        status="running",
        pid=4242,
        started_at=started,
        vendor_session_id="vendor-1",
        resumed=True,
        input_tokens=10,
        output_tokens=20,
        cache_creation_input_tokens=3,
        cache_read_input_tokens=4,
        cost_usd=Decimal("0.0125"),
        usage_estimated=True,
    )
    assert updated.status is RunStatus.RUNNING
    assert updated.pid == 4242 and updated.started_at == started
    assert updated.started_at is not None and updated.started_at.tzinfo is not None
    assert (updated.input_tokens, updated.output_tokens) == (10, 20)
    assert updated.cost_usd == Decimal("0.0125")
    assert updated.usage_estimated and updated.resumed
    assert store.get_run(run.id) == updated
    assert store.update_run(run.id) == updated
    with pytest.raises(ValueError, match="turn_index"):
        store.update_run(run.id, turn_index=7)
    with pytest.raises(ValueError, match="nonsense"):
        store.update_run(run.id, nonsense=1)
    with pytest.raises(ValueError, match="finish_run"):
        store.update_run(run.id, status=RunStatus.SUCCEEDED)
    with pytest.raises(ValueError):
        store.update_run(run.id, status="bogus")


def test_status_of_an_ended_run_cannot_change(store: Store) -> None:
    run = _run(store)
    store.finish_run(run.id, status=RunStatus.CANCELLED, reason="stopped by user")
    with pytest.raises(ConflictError, match="already ended"):
        store.update_run(run.id, status=RunStatus.RUNNING)
    # usage may still be accounted after the end
    assert store.update_run(run.id, output_tokens=99).output_tokens == 99


def test_finish_run_first_terminal_status_wins(store_url: str) -> None:
    clock = FakeClock()
    with Store.open(store_url, clock=clock) as store:
        run = _run(store)
        store.update_run(run.id, status=RunStatus.RUNNING)
        clock.advance(3)
        done = store.finish_run(
            run.id, status=RunStatus.SUCCEEDED, exit_code=0, result_text="all done", reason=None
        )
        assert done.status is RunStatus.SUCCEEDED
        assert done.ended_at == clock.now
        assert (done.exit_code, done.result_text, done.reason) == (0, "all done", None)
        clock.advance(3)
        again = store.finish_run(run.id, status=RunStatus.FAILED, reason="late failure", exit_code=1)
        assert again == done
        with pytest.raises(ValueError, match="terminal"):
            store.finish_run(run.id, status=RunStatus.RUNNING)


def test_finish_run_cancels_pending_approvals(store: Store) -> None:
    run = _run(store)
    approval = _approval(store, run)
    store.finish_run(run.id, status=RunStatus.FAILED, reason="crashed")
    cancelled = store.get_approval(approval.id)
    assert cancelled.status is ApprovalStatus.CANCELLED
    assert cancelled.decided_by == "octipusd" and cancelled.decision_reason == "run failed"


def test_finish_run_stores_the_accounting_and_cancels_approvals_in_one_commit(store: Store) -> None:
    run = _run(store)
    store.update_run(run.id, status=RunStatus.RUNNING)
    approval = _approval(store, run)
    accounting = {
        "exit_code": 3,
        "input_tokens": 10,
        "output_tokens": 2,
        "cost_usd": Decimal("0.5"),
        "result_text": "r",
    }
    done = store.finish_run(
        run.id,
        status=RunStatus.SUCCEEDED,
        exit_code=0,
        accounting=accounting,
        approvals_reason="the run ended (succeeded)",
    )
    # the finish's own exit code and result win over the accounting's
    assert (done.status, done.exit_code, done.result_text) == (RunStatus.SUCCEEDED, 0, "r")
    assert (done.input_tokens, done.output_tokens, done.cost_usd) == (10, 2, Decimal("0.5"))
    assert store.get_approval(approval.id).decision_reason == "the run ended (succeeded)"
    # an ended run keeps its status (the accounting is still written)
    again = store.finish_run(run.id, status=RunStatus.FAILED, accounting={"output_tokens": 5})
    assert (again.status, again.output_tokens) == (RunStatus.SUCCEEDED, 5)
    with pytest.raises(ValueError, match="cannot account status"):
        store.finish_run(run.id, status=RunStatus.FAILED, accounting={"status": "running"})


def test_interrupt_orphaned_runs(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code")
    old_queued = store.create_run(session_id=session.id, prompt="a", owner="old")
    old_running = store.create_run(session_id=session.id, prompt="b", owner="old")
    store.update_run(old_running.id, status=RunStatus.AWAITING_APPROVAL)
    old_done = store.create_run(session_id=session.id, prompt="c", owner="old")
    store.finish_run(old_done.id, status=RunStatus.SUCCEEDED)
    mine = store.create_run(session_id=session.id, prompt="d", owner="new")
    pending = _approval(store, old_running)
    mine_pending = _approval(store, mine)

    interrupted = store.interrupt_orphaned_runs(live_owner="new", reason="octipusd restarted")

    assert [r.id for r in interrupted] == [old_queued.id, old_running.id]
    for run in interrupted:
        assert run.status is RunStatus.INTERRUPTED
        assert run.reason == "octipusd restarted"
        assert run.ended_at is not None
        assert store.get_run(run.id) == run
    assert store.get_run(old_done.id).status is RunStatus.SUCCEEDED
    assert store.get_run(mine.id).status is RunStatus.QUEUED
    assert store.get_approval(pending.id).status is ApprovalStatus.CANCELLED
    assert store.get_approval(pending.id).decision_reason == "octipusd restarted"
    assert store.get_approval(mine_pending.id).status is ApprovalStatus.PENDING
    assert store.interrupt_orphaned_runs(live_owner="new", reason="again") == []


# Events -----------------------------------------------------------------------------------


def test_append_and_list_events(store: Store) -> None:
    run = _run(store)
    other = _run(store)
    events = [store.append_event(run.id, "text", {"n": i, "nested": {"a": [1, 2]}}) for i in range(5)]
    store.append_event(other.id, "usage", {})
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert events[0].kind == "text" and events[0].data == {"n": 0, "nested": {"a": [1, 2]}}
    assert events[0].created_at.tzinfo is not None
    assert store.list_events(run.id) == events
    assert [e.seq for e in store.list_events(run.id, after_seq=2)] == [3, 4, 5]
    assert [e.seq for e in store.list_events(run.id, after_seq=2, limit=2)] == [3, 4]
    assert store.list_events(run.id, after_seq=5) == []
    assert [e.seq for e in store.list_events(other.id)] == [1]
    with pytest.raises(InvalidRequestError):
        store.append_event(run.id, "text", ["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError):
        store.append_event(run.id, "text", {"x": object()})
    assert len(store.list_events(run.id)) == 5  # failed appends wrote nothing


# Vendor sessions --------------------------------------------------------------------------


def test_vendor_session_upsert_get_drop(store_url: str) -> None:
    clock = FakeClock()
    with Store.open(store_url, clock=clock) as store:
        session = store.create_session(workspace="/w", adapter="claude-code")
        assert store.get_vendor_session(session.id, "claude-code") is None
        saved = store.save_vendor_session(
            session_id=session.id, key="claude-code", vendor_session_id="v1", fingerprint="f1", cwd="/w"
        )
        assert saved is not None
        assert (saved.vendor_session_id, saved.fingerprint, saved.cwd, saved.clear_generation) == (
            "v1",
            "f1",
            "/w",
            0,
        )
        clock.advance(10)
        replaced = store.save_vendor_session(
            session_id=session.id, key="claude-code", vendor_session_id="v2", fingerprint="f2", cwd="/w/sub"
        )
        assert replaced is not None
        assert replaced.id == saved.id and replaced.created_at == saved.created_at
        assert replaced.updated_at == clock.now
        assert (replaced.vendor_session_id, replaced.fingerprint, replaced.cwd) == ("v2", "f2", "/w/sub")
        codex = store.save_vendor_session(
            session_id=session.id, key="codex", vendor_session_id="c1", fingerprint="f", cwd="/w"
        )
        assert codex is not None
        assert codex.id != saved.id
        assert store.get_vendor_session(session.id, "claude-code") == replaced
        assert store.drop_vendor_session(session.id, "claude-code") is True
        assert store.drop_vendor_session(session.id, "claude-code") is False
        assert store.get_vendor_session(session.id, "claude-code") is None
        assert store.get_vendor_session(session.id, "codex") == codex


# Approvals --------------------------------------------------------------------------------


def test_create_get_list_approvals(store: Store) -> None:
    run = _run(store)
    expires = datetime(2099, 1, 1, tzinfo=UTC)
    approval = _approval(store, run, expires_at=expires)
    assert approval.status is ApprovalStatus.PENDING
    assert approval.input == {"command": "rm -rf build"}
    assert approval.expires_at == expires
    assert approval.decided_at is None and approval.decided_by is None
    assert store.get_approval(approval.id) == approval
    second = _approval(store, run)
    assert {a.id for a in store.list_approvals()} == {approval.id, second.id}
    assert store.list_approvals(status="approved") == []
    assert len(store.list_approvals(status=ApprovalStatus.PENDING, run_id=run.id, limit=1)) == 1
    assert store.list_approvals(run_id=MISSING) == []


def test_approval_checks_its_run(store: Store) -> None:
    run = _run(store)
    other = store.create_session(workspace="/x", adapter="codex")
    with pytest.raises(ValueError, match="belongs to session"):
        store.create_approval(
            run_id=run.id,
            session_id=other.id,
            tool_id="t",
            subject=None,
            reason=None,
            input={},
            explanation=None,
            vendor_request_id=None,
            expires_at=None,
        )
    store.finish_run(run.id, status=RunStatus.SUCCEEDED)
    with pytest.raises(ConflictError, match="already ended"):
        _approval(store, run)


def test_decide_approval_exactly_once(store: Store) -> None:
    run = _run(store)
    approval = _approval(store, run)
    decided = store.decide_approval(approval.id, approve=True, decided_by="alice", reason="looks fine")
    assert decided.status is ApprovalStatus.APPROVED
    assert (decided.decided_by, decided.decision_reason) == ("alice", "looks fine")
    assert decided.decided_at is not None
    with pytest.raises(ApprovalError) as info:
        store.decide_approval(approval.id, approve=False, decided_by="bob")
    message = str(info.value)
    assert f"approval {approval.id} was already approved by alice at " in message
    assert store.get_approval(approval.id) == decided

    denied = store.decide_approval(_approval(store, run).id, approve=False, decided_by="bob")
    assert denied.status is ApprovalStatus.DENIED


def test_expired_approval_cannot_be_approved(store_url: str) -> None:
    clock = FakeClock()
    with Store.open(store_url, clock=clock) as store:
        run = _run(store)
        approval = _approval(store, run, expires_at=clock.now + timedelta(minutes=5))
        clock.advance(301)
        with pytest.raises(ApprovalError, match="already expired by octipusd"):
            store.decide_approval(approval.id, approve=True, decided_by="alice")
        expired = store.get_approval(approval.id)
        assert expired.status is ApprovalStatus.EXPIRED
        assert expired.decided_at == clock.now


def test_resolve_and_cancel_pending_approvals(store: Store) -> None:
    run = _run(store)
    first, second, third = (_approval(store, run) for _ in range(3))
    assert store.resolve_approval_if_pending(first.id, status=ApprovalStatus.EXPIRED, reason="timed out")
    assert not store.resolve_approval_if_pending(first.id, status="cancelled", reason="late")
    expired = store.get_approval(first.id)
    assert (expired.status, expired.decision_reason, expired.decided_by) == (
        ApprovalStatus.EXPIRED,
        "timed out",
        "octipusd",
    )
    store.decide_approval(second.id, approve=True, decided_by="alice")
    assert store.cancel_pending_approvals(run.id, reason="run stopped") == 1
    assert store.get_approval(third.id).status is ApprovalStatus.CANCELLED
    assert store.get_approval(second.id).status is ApprovalStatus.APPROVED
    assert store.cancel_pending_approvals(run.id, reason="again") == 0
    assert store.cancel_pending_approvals(MISSING, reason="none") == 0
    with pytest.raises(ValueError):
        store.resolve_approval_if_pending(first.id, status=ApprovalStatus.PENDING, reason=None)
    with pytest.raises(ValueError):
        store.cancel_pending_approvals(run.id, status="pending", reason=None)


def test_cancel_pending_approvals_with_another_status(store: Store) -> None:
    run = _run(store)
    approval = _approval(store, run)
    assert store.cancel_pending_approvals(run.id, status=ApprovalStatus.DENIED, reason="unattended") == 1
    assert store.get_approval(approval.id).status is ApprovalStatus.DENIED


def test_an_approval_says_its_decision_once_decided(store: Store) -> None:
    """Issue 14 item 10: ``decision`` is None while pending, then approve or deny (expiry and
    cancellation deny the call)."""
    run = _run(store)
    pending, approved, denied, expired, cancelled = (_approval(store, run) for _ in range(5))
    assert pending.decision is None and store.get_approval(pending.id).decision is None
    assert store.decide_approval(approved.id, approve=True, decided_by="alice").decision == "approve"
    assert store.decide_approval(denied.id, approve=False, decided_by="alice").decision == "deny"
    store.resolve_approval_if_pending(expired.id, status=ApprovalStatus.EXPIRED, reason="timed out")
    assert store.get_approval(approved.id).decision == "approve"
    assert store.get_approval(expired.id).decision == "deny"
    assert store.cancel_pending_approvals(run.id, reason="run stopped") == 2
    assert store.get_approval(cancelled.id).decision == store.get_approval(pending.id).decision == "deny"
    assert {a.id: a.decision for a in store.list_approvals(status="approved")} == {approved.id: "approve"}


# Work plans -------------------------------------------------------------------------------


def test_work_plan_save_and_replace(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code")
    assert store.get_work_plan(session.id) is None
    plan = {"steps": [{"title": "read", "status": "done"}, {"title": "write", "status": "pending"}]}
    saved = store.save_work_plan(session.id, plan)
    assert saved.plan == plan and saved.session_id == session.id
    assert store.get_work_plan(session.id) == saved
    replaced = store.save_work_plan(session.id, {"steps": []})
    assert store.get_work_plan(session.id) == replaced
    assert replaced.plan == {"steps": []}
