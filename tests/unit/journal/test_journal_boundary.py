"""The execution boundary of mutating calls (seed 000 "Implementation and guarantees", "Validation").

Every call runs ``shell__run`` for real through :meth:`ActionJournal.execute`; its side effects
are counted in the ledger file it appends to, and each test asserts the exact line count. Both
backends (SQLite and the test PostgreSQL).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import pytest

from octipusd.errors import JournalUnavailableError, StoreError
from octipusd.journal.executor import args_hash
from octipusd.toolkit import ActionOutcome, ToolOutcome
from octipusd.tools import SHELL_RUN
from tests.unit.store.racing import race

if TYPE_CHECKING:
    from octipusd.store import Store
    from tests.unit.journal.conftest import Bench

pytestmark = pytest.mark.anyio

LEDGER = "ledger.txt"
APPEND = f"echo x >> {LEDGER}"


def outcomes(bench: Bench, session_id: str | None = None) -> list[str]:
    return [a.outcome for a in bench.store.list_actions(session_id=session_id or bench.session_id)]


# ------------------------------------------------------------------ completion-write failure


async def test_completion_write_failure_then_reopen_then_denied_retry_repeats_nothing(
    bench: Bench, tasks: anyio.abc.TaskGroup, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_finish = bench.store.finish_action
    failed: list[str] = []

    def finish_failing_once(action_id: str, **kwargs: Any) -> bool:
        if not failed:
            failed.append(action_id)
            raise StoreError("database error while recording the outcome: connection reset")
        return real_finish(action_id, **kwargs)

    monkeypatch.setattr(bench.store, "finish_action", finish_failing_once)
    executed = await bench.shell(APPEND)

    # the side effect happened once and its known output is still returned
    assert bench.lines() == 1
    assert failed == [executed.action_id]
    assert executed.recorded is False
    assert executed.outcome is ActionOutcome.COMPLETED and not executed.is_error
    assert isinstance(executed.value, dict) and executed.value["exit_code"] == 0, executed.value
    # the persisted record stays started and, no longer running here, blocks later mutations
    record = bench.store.get_action(executed.action_id or "")
    assert record.outcome == "started" and record.finished_at is None and not record.resolved
    assert bench.journal.live == set()
    blocking = bench.store.blocking_actions(
        user="alice", session_id=bench.session_id, live=bench.journal.live
    )
    assert [a.id for a in blocking] == [record.id]
    # this instance's own started records are not orphans
    assert bench.store.orphan_started_actions(owner=bench.owner) == []

    # close the database and open it again, as a restarted daemon
    bench.reopen("daemon-2")
    assert bench.store.get_action(record.id).outcome == "started"
    orphans = bench.store.orphan_started_actions(owner="daemon-2")
    assert [a.id for a in orphans] == [record.id]
    orphan = bench.store.get_action(record.id)
    assert orphan.outcome == "uncertain" and orphan.recovery_state == "effect_unconfirmed"
    assert orphan.detail is not None and "daemon-1" in orphan.detail
    assert bench.store.orphan_started_actions(owner="daemon-2") == []  # exactly once

    # the next mutation asks for a recovery review of exactly that record; the person denies it
    ctx = bench.ctx()
    pending = bench.start(tasks, lambda: bench.check(ctx))
    requested = await bench.emit.wait_for("approval_requested")
    approval = bench.store.get_approval(requested["approval_id"])
    assert approval.kind == "action_recovery" and approval.action_ids == (record.id,)
    assert approval.subject == "Check earlier"
    await bench.broker.answer(approval.id, approve=False, decided_by="alice", reason="it already ran")
    result = await pending.result()
    assert not result.allowed and not result.expired
    assert result.reason.startswith("recovery review: denied by alice: it already ran"), result.reason
    assert "stay unresolved" in result.reason
    # the runtime records the refused call (not_executed); the retry never ran
    await bench.journal.refused(
        bench.scope(), SHELL_RUN.tool_id, {"command": APPEND}, SHELL_RUN.recovery_contract, result.reason
    )
    assert bench.lines() == 1
    # the evidence is preserved: still uncertain, unacknowledged, still blocking
    kept = bench.store.get_action(record.id)
    assert kept.outcome == "uncertain" and kept.review_id is None and not kept.resolved
    # the denial joins the receipt; nothing relabels the outcome
    assert [r.kind for r in bench.store.list_receipts(record.id)] == ["contract", "outcome", "review_denied"]
    blocking = bench.store.blocking_actions(user="alice", session_id=bench.session_id)
    assert [a.id for a in blocking] == [record.id]
    assert outcomes(bench) == ["uncertain", "not_executed"]


# ------------------------------------------------------------------ timeout


async def test_a_command_that_appends_then_times_out_is_uncertain_and_blocks(bench: Bench) -> None:
    executed = await bench.shell(f"{APPEND}; sleep 5", seconds=0.5)

    assert bench.lines() == 1
    assert executed.outcome is ActionOutcome.UNCERTAIN and executed.recorded
    assert isinstance(executed.value, dict) and executed.value["timed_out"] is True, executed.value
    assert executed.detail is not None and "timed out after 0.5 s" in executed.detail
    record = bench.store.get_action(executed.action_id or "")
    assert record.outcome == "uncertain" and record.recovery_state == "effect_unconfirmed"
    assert record.deadline_at is not None and not record.resolved

    ctx = bench.ctx(attended=False)
    with anyio.fail_after(10):
        result = await bench.check(ctx)
    assert not result.allowed
    assert result.reason.startswith("review required:") and record.id in result.reason, result.reason
    assert ctx.review_required == [result.reason]
    (event,) = bench.emit.of("review_required")
    assert event["tool_id"] == SHELL_RUN.tool_id and event["reason"] == result.reason
    assert bench.store.list_approvals() == []  # unattended: nobody is asked
    assert bench.lines() == 1


# ------------------------------------------------------------------ not_executed vs completed vs interrupted


async def test_parser_refusal_and_failed_exits_allow_the_next_command_without_review(bench: Bench) -> None:
    refused = await bench.shell(f'{APPEND}; echo "unclosed')
    assert refused.outcome is ActionOutcome.NOT_EXECUTED and refused.is_error
    assert isinstance(refused.value, str) and "parser refused" in refused.value, refused.value
    assert bench.lines() == 0

    exit2 = await bench.shell("exit 2")
    assert exit2.outcome is ActionOutcome.COMPLETED and not exit2.is_error
    assert isinstance(exit2.value, dict) and exit2.value["exit_code"] == 2

    lookup = await bench.shell("ls /nonexistent-octipus-directory")
    assert lookup.outcome is ActionOutcome.COMPLETED and not lookup.is_error
    assert isinstance(lookup.value, dict) and lookup.value["exit_code"] == 2, lookup.value
    assert lookup.value["stderr"]

    assert outcomes(bench) == ["not_executed", "completed", "completed"]
    assert bench.store.blocking_actions(user="alice", session_id=bench.session_id) == []
    for attended in (False, True):
        ctx = bench.ctx(attended=attended)
        with anyio.fail_after(10):
            result = await bench.check(ctx)
        assert result.allowed and result.reason == "no unresolved earlier actions", result
        assert ctx.review_required == []
    assert bench.emit.of("approval_requested") == [] and bench.store.list_approvals() == []
    assert bench.lines() == 0


async def test_cancelling_a_started_command_is_uncertain_and_needs_review(bench: Bench) -> None:
    finished: list[object] = []

    async def call() -> None:
        finished.append(await bench.shell(f"echo a >> {LEDGER}; sleep 30"))

    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await bench.wait_until(lambda: bench.lines() == 1)
            tg.cancel_scope.cancel()

    assert finished == []  # the cancellation reached the caller
    (record,) = bench.store.list_actions(session_id=bench.session_id)
    assert record.outcome == "uncertain" and record.detail == "cancelled after it started"
    assert record.recovery_state == "effect_unconfirmed" and not record.resolved
    assert bench.journal.live == set()
    assert bench.lines() == 1

    ctx = bench.ctx(attended=False)
    result = await bench.check(ctx)
    assert not result.allowed and result.reason.startswith("review required:") and record.id in result.reason
    assert ctx.review_required == [result.reason]


# ------------------------------------------------------------------ intent-write failure


async def test_intent_write_failure_blocks_execution(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[dict[str, Any]] = []

    def start_failing(**kwargs: Any) -> Any:
        attempts.append(kwargs)
        raise StoreError("database error while recording shell__run: disk I/O error")

    monkeypatch.setattr(bench.store, "start_action", start_failing)
    with pytest.raises(JournalUnavailableError) as caught:
        await bench.shell(APPEND)
    assert "shell__run was not run" in caught.value.message, caught.value.message
    assert caught.value.http_status == 503
    assert len(attempts) == 1
    assert bench.lines() == 0  # the body never ran
    assert bench.journal.live == set()
    monkeypatch.undo()
    assert bench.store.list_actions() == []  # and nothing was recorded


async def test_a_refusal_that_cannot_be_recorded_is_still_a_refusal(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    def start_failing(**kwargs: Any) -> Any:
        raise StoreError("database error: connection refused")

    monkeypatch.setattr(bench.store, "start_action", start_failing)
    recorded = await bench.journal.refused(
        bench.scope(), SHELL_RUN.tool_id, {"command": APPEND}, SHELL_RUN.recovery_contract, "denied"
    )
    assert recorded is None
    monkeypatch.undo()
    assert bench.store.list_actions() == [] and bench.lines() == 0


# ------------------------------------------------------------------ one entry per call


async def test_exactly_one_journal_entry_per_call(bench: Bench) -> None:
    completed = await bench.shell(APPEND)
    not_executed = await bench.shell('echo "unclosed')
    timed_out = await bench.shell(f"{APPEND}; sleep 5", seconds=0.3)

    async def lost_acknowledgement() -> str | dict[str, Any] | ToolOutcome:
        raise ConnectionResetError("the server closed the connection after the request was sent")

    generic = await bench.journal.execute(
        bench.scope(), "chat.send", {"text": "hello"}, SHELL_RUN.recovery_contract, lost_acknowledgement
    )
    refusal = await bench.journal.refused(
        bench.scope(), SHELL_RUN.tool_id, {"command": APPEND}, SHELL_RUN.recovery_contract, "denied by policy"
    )
    assert refusal is not None

    assert [e.outcome for e in (completed, not_executed, timed_out, generic)] == [
        ActionOutcome.COMPLETED,
        ActionOutcome.NOT_EXECUTED,
        ActionOutcome.UNCERTAIN,
        ActionOutcome.UNCERTAIN,  # a generic failure stays conservative
    ]
    records = bench.store.list_actions(session_id=bench.session_id)
    assert len(records) == 5  # five calls, five records
    assert [r.id for r in records] == [
        completed.action_id,
        not_executed.action_id,
        timed_out.action_id,
        generic.action_id,
        refusal.id,
    ]
    assert [r.outcome for r in records] == [
        "completed",
        "not_executed",
        "uncertain",
        "uncertain",
        "not_executed",
    ]
    assert [r.tool for r in records] == ["shell__run"] * 3 + ["chat.send", "shell__run"]
    assert records[0].args_hash == args_hash({"command": APPEND})
    assert records[-1].detail == "denied by policy"
    for record in records:
        receipts = bench.store.list_receipts(record.id)
        assert [r.kind for r in receipts].count("outcome") == 1, (record, receipts)
        # no argument bodies are kept, neither on the record nor in its receipt
        text = json.dumps([record.to_dict(), *[r.to_dict() for r in receipts]])
        assert "echo" not in text and "hello" not in text
    assert [r.kind for r in bench.store.list_receipts(refusal.id)] == ["outcome"]
    assert bench.lines() == 2


# ------------------------------------------------------------------ scope


async def test_an_uncertain_action_blocks_only_its_own_user_and_session(bench: Bench) -> None:
    other_session, _ = bench.new_session()
    blocked = await bench.shell(f"{APPEND}; sleep 5", seconds=0.3)
    assert blocked.outcome is ActionOutcome.UNCERTAIN

    bob = await bench.check(bench.ctx(attended=False), user="bob")
    assert bob.allowed and bob.reason == "no unresolved earlier actions", bob
    elsewhere = await bench.check(
        bench.ctx(attended=False, session_id=other_session), session_id=other_session
    )
    assert elsewhere.allowed and elsewhere.reason == "no unresolved earlier actions", elsewhere
    # bob's and the other session's commands run without any review
    assert (await bench.shell(APPEND, user="bob")).outcome is ActionOutcome.COMPLETED
    assert bench.lines() == 2

    alice = await bench.check(bench.ctx(attended=False))
    assert not alice.allowed and blocked.action_id is not None and blocked.action_id in alice.reason
    assert [a.id for a in bench.store.blocking_actions(user="alice", session_id=bench.session_id)] == [
        blocked.action_id
    ]
    assert bench.store.blocking_actions(user="bob", session_id=bench.session_id) == []
    assert bench.store.blocking_actions(user="alice", session_id=other_session) == []


# ------------------------------------------------------------------ duplicated completion


def _started(bench: Bench) -> str:
    return bench.store.start_action(
        user="alice",
        session_id=bench.session_id,
        run_id=bench.run_id,
        agent="worker-alice",
        origin="agent",
        tool="shell__run",
        args_hash=args_hash({"command": APPEND}),
        risk_class="containable",
        owner=bench.owner,
        deadline_seconds=60.0,
    ).id


async def test_a_duplicated_completion_changes_nothing(bench: Bench) -> None:
    action_id = _started(bench)
    assert bench.store.finish_action(action_id, outcome="completed", detail="exit 0") is True
    first = bench.store.get_action(action_id)
    assert bench.store.finish_action(action_id, outcome="completed", detail="exit 0") is False
    assert bench.store.finish_action(action_id, outcome="uncertain", detail="late timeout") is False
    again = bench.store.get_action(action_id)
    assert again == first
    assert again.outcome == "completed" and again.detail == "exit 0" and again.recovery_state is None
    kinds = [r.kind for r in bench.store.list_receipts(action_id)]
    assert kinds == ["contract", "outcome"]


async def test_concurrent_completions_write_the_outcome_exactly_once(bench: Bench) -> None:
    action_id = _started(bench)
    wanted = ["completed", "uncertain", "not_executed", "completed", "uncertain", "completed"]
    results = race(
        len(wanted), lambda i: bench.store.finish_action(action_id, outcome=wanted[i], detail=str(i))
    )
    assert all(isinstance(r, bool) for r in results), results
    assert results.count(True) == 1, results
    winner = results.index(True)
    record = bench.store.get_action(action_id)
    assert record.outcome == wanted[winner] and record.detail == str(winner)
    assert [r.kind for r in bench.store.list_receipts(action_id)].count("outcome") == 1


async def test_orphaned_records_are_returned_as_they_now_are(bench: Bench) -> None:
    """``orphan_started_actions`` documents "Returns: The records changed (as they are now)"."""
    action_id = _started(bench)
    orphans = bench.store.orphan_started_actions(owner="daemon-2")
    stored = bench.store.get_action(action_id)
    assert stored.outcome == "uncertain" and stored.recovery_state == "effect_unconfirmed"
    assert [a.id for a in orphans] == [action_id]
    # Once a bug: the rows were re-read from the ORM session's identity map after a bulk UPDATE, so
    # the returned records still said ``started`` (they now come from the UPDATE's RETURNING).
    assert orphans[0].outcome == "uncertain", (
        f"orphan_started_actions returned the stale pre-update record (outcome {orphans[0].outcome!r}, "
        f"recovery_state {orphans[0].recovery_state!r}); the database says {stored.outcome!r}"
    )
    assert orphans[0] == stored


def test_a_denied_review_joins_the_receipt_and_leaves_the_record_unresolved(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="codex")
    action = store.start_action(
        user="alice",
        session_id=session.id,
        run_id=None,
        agent="w",
        origin="agent",
        tool="shell__run",
        args_hash="0" * 64,
        risk_class="containable",
        owner="d1",
        deadline_seconds=60.0,
    )
    store.finish_action(action.id, outcome="uncertain", detail="timed out")
    review = store.create_approval(
        run_id=None,
        session_id=session.id,
        tool_id="shell__run",
        subject="Check earlier",
        reason="r",
        input={},
        explanation=None,
        vendor_request_id=None,
        expires_at=None,
        kind="action_recovery",
        action_ids=[action.id],
    )
    store.decide_approval(review.id, approve=False, decided_by="bob", reason="it already ran")
    kinds = [(r.kind, r.data.get("reason")) for r in store.list_receipts(action.id)]
    assert ("review_denied", "it already ran") in kinds
    kept = store.get_action(action.id)
    assert kept.review_id is None and kept.outcome == "uncertain" and not kept.resolved


# ------------------------------------------------------------------ author


async def test_a_call_records_its_author_beside_the_user_it_runs_for(bench: Bench) -> None:
    """Issue 14 item 13: a space member's call is theirs in the journal; ``user`` (the recovery
    scope) is unchanged, and a scope without an author records its user."""
    member = dataclasses.replace(bench.scope(), author="eddie")
    plain = dataclasses.replace(member, author=None)
    executed = await bench.journal.execute(
        member, SHELL_RUN.tool_id, {"command": APPEND}, SHELL_RUN.recovery_contract, _ok
    )
    refused = await bench.journal.refused(
        plain, SHELL_RUN.tool_id, {"command": APPEND}, SHELL_RUN.recovery_contract, "denied by a rule"
    )
    assert refused is not None
    recorded = bench.store.get_action(executed.action_id or "")
    assert (recorded.user, recorded.author) == ("alice", "eddie")
    assert recorded.to_dict()["author"] == "eddie"
    assert (bench.store.get_action(refused.id).user, bench.store.get_action(refused.id).author) == (
        "alice",
        "alice",
    )
    bench.reopen("daemon-2")
    assert bench.store.get_action(recorded.id).author == "eddie"


async def _ok() -> str:
    return "done"
