"""Calls started by hand and approved-action recovery (seed 001: exact claim, no replay).

:class:`ActionService` and :class:`RecoveryWorker` on the store (SQLite and PostgreSQL), running
``shell__run`` for real; every dispatch is counted in the ledger file the command appends to.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from octipusd.errors import ConflictError, NotFoundError, OctipusError, PreparationError, StoreError
from octipusd.journal.executor import args_hash
from octipusd.store.invocation_store import ToolInvocation
from octipusd.toolkit import ToolSpec
from octipusd.tools import SHELL_RUN
from tests.unit.journal.conftest import WITHIN, builtin_resolver
from tests.unit.store.racing import race

if TYPE_CHECKING:
    from tests.unit.journal.conftest import Bench

pytestmark = pytest.mark.anyio

LEDGER = "ledger.txt"
APPEND = {"command": f"echo x >> {LEDGER}"}


def allow_shell(bench: Bench) -> None:
    bench.store.add_rule(level="allow", rule="shell__run", created_by="operator")


def approved(
    bench: Bench, arguments: dict[str, Any] | None = None, session_id: str | None = None
) -> ToolInvocation:
    """An invocation that owes an execution (approved, not yet claimed)."""
    args = dict(arguments or APPEND)
    invocation, created = bench.store.create_invocation(
        user="alice",
        session_id=session_id or bench.session_id,
        tool="shell__run",
        arguments=args,
        args_hash=args_hash(args),
        request_id=None,
        status="approved",
    )
    assert created
    return invocation


async def submit_together(bench: Bench, count: int, request_id: str) -> list[tuple[ToolInvocation, bool]]:
    """Submit the ledger call ``count`` times at once under one ``request_id``; the answers."""
    service = bench.service()
    answers: list[tuple[ToolInvocation, bool]] = []

    async def submit() -> None:
        answers.append(
            await service.submit(
                user="alice",
                session_id=bench.session_id,
                tool="shell__run",
                arguments=dict(APPEND),
                request_id=request_id,
            )
        )

    with anyio.fail_after(WITHIN):
        async with anyio.create_task_group() as tg:
            for _ in range(count):
                tg.start_soon(submit)
    return answers


# ------------------------------------------------------------------ exact claim


async def test_two_recoverers_racing_for_one_approved_invocation_dispatch_it_once(bench: Bench) -> None:
    allow_shell(bench)
    invocation = approved(bench)
    services = {"daemon-a": bench.service("daemon-a"), "daemon-b": bench.service("daemon-b")}
    won: dict[str, bool] = {}

    async def dispatch(owner: str) -> None:
        won[owner] = await services[owner].dispatch(invocation.id)

    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            for owner in services:
                tg.start_soon(dispatch, owner)

    assert sorted(won.values()) == [False, True], won
    assert bench.lines() == 1
    winner = next(owner for owner, ok in won.items() if ok)
    final = bench.store.get_invocation(invocation.id)
    assert final.status == "completed" and final.claimed_by == winner and final.arguments is None
    (action,) = bench.store.list_actions(session_id=bench.session_id)
    assert action.id == final.action_id and action.invocation_id == invocation.id
    assert action.outcome == "completed" and action.origin == "manual" and action.owner == winner
    for service in services.values():  # and nobody dispatches it again
        assert await service.dispatch(invocation.id) is False
    assert bench.lines() == 1


def test_recoverers_in_separate_threads_dispatch_it_once(bench: Bench) -> None:
    allow_shell(bench)
    invocation = approved(bench)

    def recover(i: int) -> bool:
        async def main() -> bool:
            return await bench.service(f"daemon-{i}").dispatch(invocation.id)

        return anyio.run(main)

    results = race(4, recover)
    assert sorted(results, key=repr) == [False, False, False, True], results
    assert bench.lines() == 1
    assert bench.store.get_invocation(invocation.id).status == "completed"
    assert len(bench.store.list_actions(session_id=bench.session_id)) == 1


def test_the_claim_is_taken_exactly_once(bench: Bench) -> None:
    invocation = approved(bench)
    results = race(8, lambda i: bench.store.claim_invocation(invocation.id, token=f"t{i}", owner=f"d{i}"))
    assert results.count(True) == 1, results
    winner = results.index(True)
    claimed = bench.store.get_invocation(invocation.id)
    assert (
        claimed.status == "executing"
        and claimed.claim_token == f"t{winner}"
        and claimed.claimed_by == f"d{winner}"
    )
    assert bench.store.invocation_claimed(invocation.id, f"t{winner}")
    assert not bench.store.invocation_claimed(invocation.id, "t-other")


# ------------------------------------------------------------------ client retries


async def test_a_retried_request_after_a_lost_acknowledgement_runs_nothing_again(bench: Bench) -> None:
    allow_shell(bench)
    service = bench.service()
    first, created = await service.submit(
        user="alice", session_id=bench.session_id, tool="shell__run", arguments=dict(APPEND), request_id="r1"
    )
    assert created and first.status == "completed" and first.action_id is not None, first
    assert bench.lines() == 1

    # the acknowledgement was lost: the client sends the same request again
    again, created = await service.submit(
        user="alice", session_id=bench.session_id, tool="shell__run", arguments=dict(APPEND), request_id="r1"
    )
    assert not created and again.id == first.id and again.status == "completed"
    assert bench.lines() == 1

    with pytest.raises(ConflictError, match="already used"):
        await service.submit(
            user="alice",
            session_id=bench.session_id,
            tool="shell__run",
            arguments={"command": f"echo y >> {LEDGER}"},
            request_id="r1",
        )
    assert bench.lines() == 1
    assert [i.id for i in bench.store.list_invocations(user="alice")] == [first.id]
    assert len(bench.store.list_actions(session_id=bench.session_id)) == 1

    # request ids are per user: bob's "r1" is a new call
    bobs, created = await service.submit(
        user="bob",
        session_id=bench.session_id,
        tool="shell__run",
        arguments={"command": "true"},
        request_id="r1",
    )
    assert created and bobs.id != first.id and bobs.status == "completed"
    assert bench.lines() == 1


async def test_concurrent_retries_of_one_request_run_it_once(bench: Bench) -> None:
    allow_shell(bench)
    answers = await submit_together(bench, 3, "same")
    assert sorted(created for _, created in answers) == [False, False, True], answers
    assert len({invocation.id for invocation, _ in answers}) == 1
    assert bench.lines() == 1
    assert len(bench.store.list_actions(session_id=bench.session_id)) == 1


def test_the_store_keys_concurrent_creations_by_request_id(bench: Bench) -> None:
    args = dict(APPEND)

    def create(i: int) -> tuple[ToolInvocation, bool]:
        return bench.store.create_invocation(
            user="alice",
            session_id=bench.session_id,
            tool="shell__run",
            arguments=args,
            args_hash=args_hash(args),
            request_id="k1",
            status="approved",
        )

    results = race(4, create)
    assert all(isinstance(r, tuple) for r in results), results
    pairs = [r for r in results if isinstance(r, tuple)]
    assert sorted(created for _, created in pairs) == [False, False, False, True]
    assert len({invocation.id for invocation, _ in pairs}) == 1
    other = {"command": "echo other"}
    with pytest.raises(ConflictError, match="already used"):
        bench.store.create_invocation(
            user="alice",
            session_id=bench.session_id,
            tool="shell__run",
            arguments=other,
            args_hash=args_hash(other),
            request_id="k1",
            status="approved",
        )


# ------------------------------------------------------------------ preparation failures


class ConnectorDown(OctipusError):
    code = "connector_down"


class Resolver:
    """A resolver whose lookup (``on="call"``) or connection (``on="enter"``) can fail."""

    def __init__(self, on: str) -> None:
        self.on = on
        self.error: BaseException | None = None
        self.entered = 0

    def __call__(self, tool_id: str) -> Any:
        if self.error is not None and self.on == "call":
            raise self.error
        return self._connect(tool_id)

    @asynccontextmanager
    async def _connect(self, tool_id: str) -> AsyncIterator[ToolSpec]:
        if self.error is not None and self.on == "enter":
            raise self.error
        if tool_id != SHELL_RUN.tool_id:
            raise NotFoundError(f"no tool {tool_id!r}")
        self.entered += 1
        yield SHELL_RUN


ERRORS: dict[str, Callable[[], BaseException]] = {
    "timeout": lambda: TimeoutError("the policy read timed out"),
    "octipus_error": lambda: ConnectorDown("the connector did not answer"),
}


@pytest.mark.parametrize("error", sorted(ERRORS))
@pytest.mark.parametrize("on", ["call", "enter"])
async def test_a_preparation_failure_releases_only_its_own_claim(bench: Bench, on: str, error: str) -> None:
    allow_shell(bench)
    invocation = approved(bench)
    resolver = Resolver(on)
    resolver.error = ERRORS[error]()
    service = bench.service(resolve=resolver)

    with pytest.raises(PreparationError) as caught:
        await service.dispatch(invocation.id)
    assert "stays approved" in caught.value.message, caught.value.message
    released = bench.store.get_invocation(invocation.id)
    assert released.status == "approved", (
        f"a failed preparation ({on}: {error}) left the invocation {released.status!r}, claimed by "
        f"{released.claimed_by!r}; it must go back to approved (seed 001)"
    )
    assert released.claim_token is None and released.claimed_by is None and released.action_id is None
    assert released.arguments == APPEND  # still owed, arguments kept
    assert released.error is not None and released.error.startswith("preparation failed, will retry")
    assert bench.store.list_actions() == []
    assert bench.lines() == 0
    assert [i.id for i in bench.store.owed_invocations("alice")] == [invocation.id]

    resolver.error = None  # the dependency is back: the retry runs it once
    assert await service.dispatch(invocation.id) is True
    assert bench.store.get_invocation(invocation.id).status == "completed"
    assert bench.lines() == 1
    assert await service.dispatch(invocation.id) is False
    assert bench.lines() == 1


async def test_a_validation_rejection_in_preparation_ends_the_invocation(bench: Bench) -> None:
    allow_shell(bench)
    invocation = approved(bench)

    def unknown(tool_id: str) -> Any:
        raise NotFoundError(f"no tool {tool_id!r} can be started by hand here")

    assert await bench.service(resolve=unknown).dispatch(invocation.id) is True
    ended = bench.store.get_invocation(invocation.id)
    assert ended.status == "not_executed" and ended.error is not None and "no tool" in ended.error
    assert bench.lines() == 0


async def test_an_executor_that_lost_its_claim_during_preparation_cannot_dispatch(bench: Bench) -> None:
    allow_shell(bench)
    invocation = approved(bench)
    inner = Resolver("call")

    def steal(tool_id: str) -> Any:
        # another executor takes over while this one prepares (its claim is released and retaken)
        current = bench.store.get_invocation(invocation.id)
        assert current.claim_token is not None
        assert bench.store.release_invocation_claim(invocation.id, current.claim_token, reason="test")
        assert bench.store.claim_invocation(invocation.id, token="successor", owner="daemon-b")
        return inner(tool_id)

    await bench.service("daemon-a", resolve=steal).dispatch(invocation.id)
    assert bench.lines() == 0
    assert bench.store.list_actions() == []  # started was refused, so nothing ran
    kept = bench.store.get_invocation(invocation.id)
    assert kept.status == "executing" and kept.claim_token == "successor" and kept.claimed_by == "daemon-b"


def test_only_the_exact_undispatched_claim_can_be_released(bench: Bench) -> None:
    invocation = approved(bench)
    assert bench.store.claim_invocation(invocation.id, token="mine", owner="daemon-a")
    assert not bench.store.release_invocation_claim(invocation.id, "someone-else", reason="x")
    started = bench.store.start_action(
        user="alice",
        session_id=bench.session_id,
        run_id=None,
        agent="manual:alice",
        origin="manual",
        tool="shell__run",
        args_hash=invocation.args_hash,
        risk_class="containable",
        owner="daemon-a",
        deadline_seconds=60.0,
        invocation=(invocation.id, "mine"),
    )
    assert bench.store.get_invocation(invocation.id).action_id == started.id
    assert not bench.store.release_invocation_claim(invocation.id, "mine", reason="x")  # it may have run
    assert bench.store.get_invocation(invocation.id).status == "executing"
    with pytest.raises(ConflictError):  # a second start for the same claim is refused
        bench.store.start_action(
            user="alice",
            session_id=bench.session_id,
            run_id=None,
            agent="manual:alice",
            origin="manual",
            tool="shell__run",
            args_hash=invocation.args_hash,
            risk_class="containable",
            owner="daemon-a",
            deadline_seconds=60.0,
            invocation=(invocation.id, "mine"),
        )
    assert [a.id for a in bench.store.list_actions()] == [started.id]


# ------------------------------------------------------------------ restart


async def test_a_failed_outcome_write_keeps_the_claim_for_quarantine_and_never_calls_again(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    allow_shell(bench)
    invocation = approved(bench)
    real_finish = bench.store.finish_invocation
    writes: list[str | None] = []

    def finish_failing_once(*args: Any, **kwargs: Any) -> bool:
        writes.append(kwargs.get("status"))
        if len(writes) == 1:
            raise StoreError("database error while recording the end of the invocation: connection reset")
        return real_finish(*args, **kwargs)

    monkeypatch.setattr(bench.store, "finish_invocation", finish_failing_once)
    service = bench.service("daemon-a")
    assert await service.dispatch(invocation.id) is True
    assert bench.lines() == 1
    assert writes == ["completed"]  # one attempt: no second write fabricating a failure
    kept = bench.store.get_invocation(invocation.id)
    assert kept.status == "executing" and kept.claimed_by == "daemon-a" and kept.action_id is not None
    assert bench.store.get_action(kept.action_id).outcome == "started"
    assert await service.dispatch(invocation.id) is False
    assert await bench.service("daemon-b").dispatch(invocation.id) is False
    assert bench.lines() == 1

    bench.reopen("daemon-b")  # the restart settles it: uncertain, never dispatched again
    (settled,) = bench.store.quarantine_invocations(owner="daemon-b")
    assert settled.id == invocation.id and settled.status == "uncertain"
    bench.store.orphan_started_actions(owner="daemon-b")
    assert bench.store.get_action(kept.action_id).outcome == "uncertain"
    assert await bench.service("daemon-b").dispatch(invocation.id) is False
    assert bench.store.owed_invocations("alice") == []
    assert bench.lines() == 1


async def test_quarantine_at_restart_requeues_undispatched_claims_and_never_replays_started_ones(
    bench: Bench,
) -> None:
    allow_shell(bench)
    undispatched = approved(bench)
    assert bench.store.claim_invocation(undispatched.id, token="t1", owner="daemon-old")
    started = approved(bench, {"command": f"echo started >> {LEDGER}"})
    assert bench.store.claim_invocation(started.id, token="t2", owner="daemon-old")
    action = bench.store.start_action(
        user="alice",
        session_id=bench.session_id,
        run_id=None,
        agent="manual:alice",
        origin="manual",
        tool="shell__run",
        args_hash=started.args_hash,
        risk_class="containable",
        owner="daemon-old",
        deadline_seconds=60.0,
        invocation=(started.id, "t2"),
    )
    mine = approved(bench, {"command": "true"})
    assert bench.store.claim_invocation(mine.id, token="t3", owner="daemon-new")

    settled = {i.id: i for i in bench.store.quarantine_invocations(owner="daemon-new")}
    assert set(settled) == {undispatched.id, started.id}
    assert settled[undispatched.id].status == "approved" and settled[undispatched.id].claim_token is None
    assert settled[started.id].status == "uncertain" and settled[started.id].arguments is None
    assert settled[started.id].error is not None and "not repeated" in settled[started.id].error
    assert bench.store.get_invocation(mine.id).status == "executing"  # this instance's own claim
    assert bench.store.quarantine_invocations(owner="daemon-new") == []
    bench.store.orphan_started_actions(owner="daemon-new")
    assert bench.store.get_action(action.id).outcome == "uncertain"

    bench.build("daemon-new")
    service = bench.service("daemon-new", journal=bench.journal)
    assert await service.dispatch(started.id) is False  # never dispatched again
    assert [i.id for i in bench.store.owed_invocations("alice")] == [undispatched.id]

    # the owed one first needs a recovery review of the session's uncertain action
    assert await service.dispatch(undispatched.id) is True
    waiting = bench.store.get_invocation(undispatched.id)
    assert waiting.status == "awaiting_approval" and waiting.approval_id is not None
    review = bench.store.get_approval(waiting.approval_id)
    assert review.kind == "action_recovery" and review.action_ids == (action.id,)
    assert bench.lines() == 0
    await bench.broker.answer(review.id, approve=True, decided_by="alice")
    assert bench.store.get_invocation(undispatched.id).status == "approved"
    assert bench.store.get_action(action.id).review_id == review.id
    assert await service.dispatch(undispatched.id) is True
    assert bench.store.get_invocation(undispatched.id).status == "completed"
    assert bench.store.get_invocation(started.id).status == "uncertain"
    assert bench.lines() == 1
    assert (bench.workspace / LEDGER).read_text() == "x\n"  # the started call's command never ran


async def test_startup_recovery_dispatches_owed_work_once_then_is_quiet(bench: Bench) -> None:
    allow_shell(bench)
    invocation = approved(bench)
    service = bench.service()
    worker = service.worker
    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            await tg.start(worker.run)
            await bench.wait_until(lambda: bench.store.get_invocation(invocation.id).terminal)
            assert bench.store.get_invocation(invocation.id).status == "completed"
            assert bench.lines() == 1
            passes = worker.passes
            assert passes == 1
            await anyio.sleep(0.3)  # no signal: no further pass, no periodic scan
            assert worker.passes == passes
            tg.cancel_scope.cancel()
    assert bench.lines() == 1
    assert len(bench.store.list_actions()) == 1


async def test_the_worker_outlives_a_failing_pass_and_keeps_its_signals(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    allow_shell(bench)
    service = bench.service()
    worker = service.worker
    worker.retry_seconds = 0.3
    real_deadline, real_users = bench.store.next_action_deadline, bench.store.owed_users_of_session
    failed: list[str] = []

    def deadline_failing_once() -> Any:
        if "deadline" not in failed:
            failed.append("deadline")
            raise RuntimeError("a bug while reading the next deadline")
        return real_deadline()

    def users_failing_once(session_id: str) -> Any:
        if "users" not in failed:
            failed.append("users")
            raise StoreError("database error while reading owed users: connection reset")
        return real_users(session_id)

    monkeypatch.setattr(bench.store, "next_action_deadline", deadline_failing_once)
    monkeypatch.setattr(bench.store, "owed_users_of_session", users_failing_once)
    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            await tg.start(worker.run)
            await bench.wait_until(lambda: "deadline" in failed)
            invocation = approved(bench)
            worker.signal_session(bench.session_id)  # its first read fails: the signal is kept
            await bench.wait_until(lambda: bench.store.get_invocation(invocation.id).terminal, within=5)
            tg.cancel_scope.cancel()
    assert failed == ["deadline", "users"]
    assert bench.store.get_invocation(invocation.id).status == "completed" and bench.lines() == 1
    logged = [r for r in caplog.records if r.getMessage().startswith("a recovery pass failed")]
    assert len(logged) == 2 and logged[0].exc_info is not None
    assert isinstance(logged[0].exc_info[1], RuntimeError) and isinstance(logged[1].exc_info[1], StoreError)


async def test_an_approval_signals_recovery_of_that_call_once(bench: Bench) -> None:
    service = bench.service()
    asked = {"command": f"printf 'x\\n' >> {LEDGER}"}  # ASK by default (``echo`` is allowed)
    worker = service.worker
    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            await tg.start(worker.run)
            await anyio.sleep(0.1)
            assert worker.passes == 0  # nothing owed at start-up: quiet
            owed, created = await service.submit(
                user="alice",
                session_id=bench.session_id,
                tool="shell__run",
                arguments=dict(asked),
                request_id="a1",
            )
            assert created and owed.status == "awaiting_approval" and owed.approval_id is not None
            assert bench.lines() == 0
            await bench.broker.answer(owed.approval_id, approve=True, decided_by="alice")
            await bench.wait_until(lambda: bench.store.get_invocation(owed.id).terminal)
            assert bench.store.get_invocation(owed.id).status == "completed"
            assert bench.lines() == 1
            passes = worker.passes
            await anyio.sleep(0.3)
            assert worker.passes == passes
            denied, _ = await service.submit(
                user="alice",
                session_id=bench.session_id,
                tool="shell__run",
                arguments=dict(asked),
                request_id="a2",
            )
            assert denied.approval_id is not None
            await bench.broker.answer(denied.approval_id, approve=False, decided_by="alice")
            assert bench.store.get_invocation(denied.id).status == "denied"
            await anyio.sleep(0.3)
            tg.cancel_scope.cancel()
    assert bench.lines() == 1


# ------------------------------------------------------------------ deletion


async def test_session_and_user_deletion_remove_journal_records(bench: Bench) -> None:
    first, _ = bench.new_session(with_run=False)
    second, _ = bench.new_session(with_run=False)
    in_first = [bench.uncertain(session_id=first), bench.uncertain(session_id=first, user="bob")]
    alices = bench.uncertain(session_id=second)
    bobs = bench.uncertain(session_id=second, user="bob")
    owed_first = approved(bench, session_id=first)
    owed_second = approved(bench, session_id=second)

    bench.store.delete_session(first)
    assert bench.store.list_actions(session_id=first) == []
    for action in in_first:
        assert bench.store.list_receipts(action.id) == []
        with pytest.raises(NotFoundError):
            bench.store.get_action(action.id)
    with pytest.raises(NotFoundError):
        bench.store.get_invocation(owed_first.id)
    assert {a.id for a in bench.store.list_actions(session_id=second)} == {alices.id, bobs.id}
    assert bench.store.get_invocation(owed_second.id).status == "approved"

    assert bench.store.delete_user_journal("alice") == 1
    assert bench.store.list_actions(user="alice") == []
    assert bench.store.list_receipts(alices.id) == []
    assert bench.store.list_invocations(user="alice") == []
    assert [a.id for a in bench.store.list_actions()] == [bobs.id]
    assert [r.kind for r in bench.store.list_receipts(bobs.id)] == ["contract", "outcome"]


async def test_an_unanswered_approval_of_a_hand_started_call_expires(bench: Bench) -> None:
    """Nobody waits on a run-less approval: the recovery worker expires it on time, and the
    invocation with it; nothing runs."""
    bench.build(bench.owner, timeout=0.5)
    service = bench.service()
    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            await tg.start(service.worker.run)
            owed, _ = await service.submit(
                user="alice",
                session_id=bench.session_id,
                tool="shell__run",
                arguments={"command": f"printf 'x\\n' >> {LEDGER}"},
                request_id="exp-1",
            )
            assert owed.status == "awaiting_approval" and owed.approval_id is not None
            await bench.wait_until(lambda: bench.store.get_invocation(owed.id).status == "expired", within=5)
            tg.cancel_scope.cancel()
    assert bench.store.get_approval(owed.approval_id).status == "expired"
    assert bench.lines() == 0


# ------------------------------------------------------------------ user-trial findings


def _ledger_tool(bench: Bench, *, read_only: bool = False) -> ToolSpec:
    """A mutating tool whose effect lands in the ledger and then times out (uncertain), keyed
    by its ``key`` argument, with a probe reading the ledger; or a read-only one."""
    from octipusd.toolkit import ProbeResult, ProbeStatus, RecoveryContract, RiskClass, ToolOutcome

    ledger = bench.ledger

    async def append(identity: Any, host: Any, arguments: dict[str, Any]) -> Any:
        with ledger.open("a") as handle:
            handle.write(f"{arguments['key']}\n")
        return ToolOutcome("sent", uncertain="timed out after the request was accepted", is_error=True)

    async def read(identity: Any, host: Any, arguments: dict[str, Any]) -> Any:
        return {"lines": bench.lines()}

    async def probe(action: Any) -> ProbeResult:
        if action.idempotency_key is None:
            return ProbeResult(ProbeStatus.UNKNOWN, "no key to look for")
        present = action.idempotency_key in ledger.read_text().split()
        return ProbeResult(ProbeStatus.APPLIED if present else ProbeStatus.NOT_APPLIED, "ledger read")

    contract = RecoveryContract(
        RiskClass.COMPENSATABLE, idempotency_key=lambda a: str(a.get("key") or "") or None, probe=probe
    )
    spec = ToolSpec(
        name="ext__read" if read_only else "ext__send",
        identity="ext.read" if read_only else "ext.send",
        description="test tool",
        input_schema={"type": "object"},
        handler=read if read_only else append,
        read_only=read_only,
        contract=None if read_only else contract,
    )
    if not read_only:
        bench.contracts[spec.tool_id] = contract
    bench.store.add_rule(level="allow", rule=spec.tool_id, created_by="operator")
    return spec


async def test_a_hand_started_retry_of_an_effect_verified_applied_is_refused(bench: Bench) -> None:
    send = _ledger_tool(bench)
    service = bench.service(resolve=builtin_resolver(send))
    first, _ = await service.submit(
        user="alice", session_id=bench.session_id, tool="ext.send", arguments={"key": "k5"}, request_id=None
    )
    assert first.status == "uncertain" and bench.lines() == 1
    retry, _ = await service.submit(
        user="alice", session_id=bench.session_id, tool="ext.send", arguments={"key": "k5"}, request_id=None
    )
    assert retry.status == "not_executed", retry
    assert retry.error is not None and "retrying would duplicate it" in retry.error
    assert bench.lines() == 1  # probed applied: the effect is not repeated
    other, _ = await service.submit(
        user="alice", session_id=bench.session_id, tool="ext.send", arguments={"key": "k6"}, request_id=None
    )
    assert other.status == "uncertain" and bench.lines() == 2  # another key is another action


async def test_a_foreground_preparation_failure_is_retried_and_can_be_cancelled(bench: Bench) -> None:
    allow_shell(bench)
    resolver = Resolver("enter")
    resolver.error = ConnectorDown("the connector did not answer")
    service = bench.service(resolve=resolver)
    service.worker.retry_seconds = 0.3
    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            await tg.start(service.worker.run)
            with pytest.raises(PreparationError, match=r"retries it in 0\.3 s"):
                await service.submit(
                    user="alice",
                    session_id=bench.session_id,
                    tool="shell__run",
                    arguments=dict(APPEND),
                    request_id="p1",
                )
            [owed] = bench.store.owed_invocations("alice")
            resolver.error = None  # the dependency is back: the worker's retry runs it once
            await bench.wait_until(lambda: bench.store.get_invocation(owed.id).terminal, within=5)
            tg.cancel_scope.cancel()
    assert bench.store.get_invocation(owed.id).status == "completed" and bench.lines() == 1
    with pytest.raises(ConflictError, match="completed"):
        bench.store.cancel_invocation(owed.id, by="alice")


async def test_a_call_awaiting_approval_can_be_cancelled(bench: Bench) -> None:
    service = bench.service()
    owed, _ = await service.submit(
        user="alice",
        session_id=bench.session_id,
        tool="shell__run",
        arguments={"command": f"printf 'x\\n' >> {LEDGER}"},
        request_id="c1",
    )
    assert owed.status == "awaiting_approval" and owed.approval_id is not None
    cancelled = bench.store.cancel_invocation(owed.id, by="alice")
    assert cancelled.status == "cancelled" and cancelled.arguments is None
    assert bench.store.get_approval(owed.approval_id).status == "cancelled"
    assert await service.dispatch(owed.id) is False and bench.lines() == 0


async def test_a_read_only_tool_started_by_hand_runs_unjournaled(bench: Bench) -> None:
    read = _ledger_tool(bench, read_only=True)
    service = bench.service(resolve=builtin_resolver(read))
    done, _ = await service.submit(
        user="alice", session_id=bench.session_id, tool="ext.read", arguments={}, request_id=None
    )
    assert done.status == "completed" and done.result is not None and '"lines"' in done.result
    assert bench.store.list_actions() == []


async def test_a_request_id_belongs_to_its_session(bench: Bench) -> None:
    allow_shell(bench)
    service = bench.service()
    await service.submit(
        user="alice", session_id=bench.session_id, tool="shell__run", arguments=dict(APPEND), request_id="r1"
    )
    other, _ = bench.new_session()
    from octipusd.errors import InvalidRequestError

    with pytest.raises(InvalidRequestError, match="already used in session"):
        await service.submit(
            user="alice", session_id=other, tool="shell__run", arguments=dict(APPEND), request_id="r1"
        )
    assert bench.lines() == 1


async def test_a_read_by_hand_stays_available_while_a_review_is_owed(bench: Bench) -> None:
    send = _ledger_tool(bench)
    read = _ledger_tool(bench, read_only=True)
    service = bench.service(resolve=builtin_resolver(send, read))
    # an uncertain send whose probe cannot settle it (its key is never written: no key argument)
    first, _ = await service.submit(
        user="alice", session_id=bench.session_id, tool="ext.send", arguments={"key": ""}, request_id=None
    )
    assert first.status == "uncertain"
    done, _ = await service.submit(
        user="alice", session_id=bench.session_id, tool="ext.read", arguments={}, request_id=None
    )
    assert done.status == "completed"  # no recovery review for a read (seed 000)
    blocked, _ = await service.submit(
        user="alice", session_id=bench.session_id, tool="ext.send", arguments={"key": "k9"}, request_id=None
    )
    assert blocked.status == "awaiting_approval" and blocked.approval_id is not None
    assert bench.store.get_approval(blocked.approval_id).kind == "action_recovery"


async def test_a_hand_started_call_gets_a_host_of_its_own_call_not_of_a_run(bench: Bench) -> None:
    """The handler of a hand-started call sees the decided tool authorized, any other tool refused,
    and the run-only services (plan, context, children) refused with a conflict, not faked."""
    from octipusd.errors import ConflictError
    from octipusd.toolkit import ChildRequest

    async def inspect(identity: Any, host: Any, arguments: dict[str, Any]) -> Any:
        own = await host.authorize(identity, "ext.inspect", {})
        other = await host.authorize(identity, "shell__run", {})
        refused = []
        for call in (
            host.get_work_plan(identity),
            host.run_context(identity),
            host.spawn_child(identity, ChildRequest(role="coder", brief="b")),
        ):
            try:
                await call
            except ConflictError as exc:
                refused.append(exc.message)
        return {"own": own.allowed, "other": other.allowed, "refused": refused, "run_id": identity.run_id}

    spec = ToolSpec(
        name="ext__inspect",
        identity="ext.inspect",
        description="test tool",
        input_schema={"type": "object"},
        handler=inspect,
        read_only=True,
    )
    bench.store.add_rule(level="allow", rule=spec.tool_id, created_by="operator")
    service = bench.service(resolve=builtin_resolver(spec))
    done, _ = await service.submit(
        user="alice", session_id=bench.session_id, tool="ext.inspect", arguments={}, request_id=None
    )
    assert done.status == "completed", done
    assert done.result is not None
    seen = json.loads(done.result)
    assert seen["own"] is True and seen["other"] is False
    assert seen["run_id"] == f"manual-{done.id}"
    assert len(seen["refused"]) == 3
    assert all("not available to a call started by hand" in text for text in seen["refused"])


async def test_a_hand_started_call_spends_a_use_of_the_grant_that_allowed_it(bench: Bench) -> None:
    """Issue 14 item 9: a grant with one use allows one call, an agent's or a person's; the next
    hand-started call under it asks (the default level of shell__run), and runs nothing."""
    grant = bench.store.create_grant(tool_id="shell__run", level="allow", created_by="operator", max_uses=1)
    service = bench.service()
    first, _ = await service.submit(
        user="alice", session_id=bench.session_id, tool="shell__run", arguments=dict(APPEND), request_id=None
    )
    assert first.status == "completed" and bench.lines() == 1
    assert bench.store.get_grant(grant.id).uses == 1
    second, _ = await service.submit(
        user="alice", session_id=bench.session_id, tool="shell__run", arguments=dict(APPEND), request_id=None
    )
    assert second.status == "awaiting_approval" and bench.lines() == 1
    assert bench.store.get_grant(grant.id).uses == 1


async def test_concurrent_hand_started_calls_under_a_one_use_grant_run_one(bench: Bench) -> None:
    grant = bench.store.create_grant(tool_id="shell__run", level="allow", created_by="operator", max_uses=1)
    service = bench.service()
    statuses: list[str] = []

    async def submit() -> None:
        done, _ = await service.submit(
            user="alice",
            session_id=bench.session_id,
            tool="shell__run",
            arguments=dict(APPEND),
            request_id=None,
        )
        statuses.append(done.status)

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(submit)
    assert sorted(statuses) == ["awaiting_approval", "awaiting_approval", "completed"]
    assert bench.lines() == 1 and bench.store.get_grant(grant.id).uses == 1


async def test_a_retry_racing_its_request_under_a_one_use_grant_spends_nothing(bench: Bench) -> None:
    """Two submits of one request id against a one-use grant: the request that records the
    invocation decides it and spends the use; the retry returns that invocation and spends nothing.

    Forced order: both pass the request-id look-up before either records the invocation, and a
    counted use waits until the request's invocation exists, so a decision taken before the
    invocation is claimed would spend the use while the other request's invocation is the one kept.
    """
    grant = bench.store.create_grant(tool_id="shell__run", level="allow", created_by="operator", max_uses=1)
    looked_up = threading.Barrier(2, timeout=WITHIN)
    lookups = iter(range(2))
    find, settle = bench.store.find_invocation, bench.store.settle_invocation

    def find_together(user: str, request_id: str) -> ToolInvocation | None:
        if next(lookups, None) is not None:  # the two submits' look-ups, not a later one
            looked_up.wait()
        return find(user, request_id)

    def use_once_recorded(invocation_id: str, status: str, **kwargs: Any) -> bool:
        counted = settle(invocation_id, status, **kwargs)  # the grant's use is counted here
        deadline = time.monotonic() + WITHIN
        while counted and find("alice", "same") is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return counted

    bench.store.find_invocation = find_together  # type: ignore[method-assign]
    bench.store.settle_invocation = use_once_recorded  # type: ignore[method-assign]
    answers = await submit_together(bench, 2, "same")
    assert sorted(created for _, created in answers) == [False, True], answers
    assert len({invocation.id for invocation, _ in answers}) == 1
    final = bench.store.get_invocation(answers[0][0].id)
    assert final.status == "completed", final
    assert bench.lines() == 1
    assert bench.store.get_grant(grant.id).uses == 1


async def test_a_call_that_cannot_be_decided_is_withdrawn_not_left_waiting(bench: Bench) -> None:
    grant = bench.store.create_grant(tool_id="shell__run", level="allow", created_by="operator", max_uses=1)

    def broken_use(invocation_id: str, status: str, **kwargs: Any) -> bool:
        raise StoreError(f"database error while using grant {kwargs['grant_id']}: connection reset")

    bench.store.settle_invocation = broken_use  # type: ignore[method-assign]
    service = bench.service()
    with pytest.raises(StoreError, match="connection reset"):
        await service.submit(
            user="alice",
            session_id=bench.session_id,
            tool="shell__run",
            arguments=dict(APPEND),
            request_id="r",
        )
    (withdrawn,) = bench.store.list_invocations(user="alice")
    assert withdrawn.status == "cancelled" and "could not be decided" in (withdrawn.error or ""), withdrawn
    again, created = await service.submit(
        user="alice", session_id=bench.session_id, tool="shell__run", arguments=dict(APPEND), request_id="r"
    )
    assert not created and again.id == withdrawn.id and again.status == "cancelled"
    assert bench.lines() == 0 and bench.store.get_grant(grant.id).uses == 0


async def test_a_background_command_cannot_be_started_by_hand_and_asks_no_one(bench: Bench) -> None:
    from octipusd.errors import InvalidRequestError

    service = bench.service()
    with pytest.raises(InvalidRequestError, match="shell__run_background' cannot be started by hand"):
        await service.submit(
            user="alice",
            session_id=bench.session_id,
            tool="shell__run_background",
            arguments={"command": "sleep 60"},
            request_id=None,
        )
    assert bench.store.list_approvals() == [] and bench.store.list_actions() == []
