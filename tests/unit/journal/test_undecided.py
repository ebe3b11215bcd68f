"""A call a person started by hand that a stopped daemon recorded but never decided (issue 26 item 5).

A daemon that dies after recording a hand-started call (``awaiting_approval``, no approval yet)
and before deciding it left it undecided for ever. Start-up recovery decides it again under the
current policy, with an exact claim (seed 001): ALLOW runs it once, ASK raises a fresh approval,
DENY ends it with the reason; a retry of its request id then gets that answer. The grant use an
ALLOW rests on commits with the decision, so a daemon killed in between spends nothing.
:class:`ActionService` and :class:`RecoveryWorker` over the real store (SQLite and PostgreSQL),
``shell__run`` running for real and counted in the ledger.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest

from octipusd.errors import ConflictError
from octipusd.journal.executor import args_hash
from octipusd.runtime.actions import ActionService
from octipusd.store.invocation_store import ToolInvocation
from tests.unit.journal.conftest import LEDGER, WITHIN

if TYPE_CHECKING:
    from tests.unit.journal.conftest import Bench

pytestmark = pytest.mark.anyio

#: ``printf`` is not among the commands the built-in rules allow: the default level (ASK) applies.
APPEND = {"command": f"printf 'x\\n' >> {LEDGER}"}


def left_undecided(bench: Bench, request_id: str, *, claim: tuple[str, str] | None = None) -> ToolInvocation:
    """The invocation a daemon recorded and died before deciding (``claim``: its decision claim;
    None: as a daemon that kept none left it)."""
    extra: dict[str, Any] = {"claim": claim} if claim is not None else {}
    invocation, created = bench.store.create_invocation(
        user="alice",
        session_id=bench.session_id,
        tool="shell__run",
        arguments=dict(APPEND),
        args_hash=args_hash(APPEND),
        request_id=request_id,
        status="awaiting_approval",
        **extra,
    )
    assert created and invocation.approval_id is None
    return invocation


async def restart(bench: Bench, owner: str = "daemon-new") -> ActionService:
    """A new daemon instance on the same store: its recovery worker's start-up pass runs."""
    bench.build(owner)
    return bench.service(owner, journal=bench.journal)


async def run_worker_until(service: ActionService, done: Any) -> None:
    with anyio.fail_after(WITHIN):
        async with anyio.create_task_group() as tg:
            await tg.start(service.worker.run)
            while not done():  # noqa: ASYNC110 - a row has no event to wait on
                await anyio.sleep(0.02)
            tg.cancel_scope.cancel()


async def retry(service: ActionService, bench: Bench, request_id: str) -> tuple[ToolInvocation, bool]:
    return await service.submit(
        user="alice",
        session_id=bench.session_id,
        tool="shell__run",
        arguments=dict(APPEND),
        request_id=request_id,
    )


async def test_an_allowed_call_left_undecided_runs_once_after_the_restart(bench: Bench) -> None:
    bench.store.add_rule(level="allow", rule="shell__run", created_by="operator")
    stuck = left_undecided(bench, "r1")
    service = await restart(bench)
    await run_worker_until(service, lambda: bench.store.get_invocation(stuck.id).terminal)
    done = bench.store.get_invocation(stuck.id)
    assert done.status == "completed", done
    assert bench.lines() == 1
    again, created = await retry(service, bench, "r1")  # the client's retry gets the real answer
    assert not created and again.id == stuck.id and again.status == "completed"
    assert bench.lines() == 1
    assert bench.store.undecided_invocations(owner="daemon-new") == []


async def test_a_call_the_policy_asks_for_gets_a_fresh_approval_after_the_restart(bench: Bench) -> None:
    stuck = left_undecided(bench, "r1", claim=("token-old", "daemon-old"))
    service = await restart(bench)
    await run_worker_until(service, lambda: bench.store.get_invocation(stuck.id).approval_id is not None)
    waiting = bench.store.get_invocation(stuck.id)
    assert waiting.status == "awaiting_approval" and waiting.claim_token is None, waiting
    assert waiting.approval_id is not None
    approval = bench.store.get_approval(waiting.approval_id)
    assert approval.status == "pending" and approval.kind == "tool" and approval.run_id is None
    assert approval.reason is not None and "decided again after octipusd restarted" in approval.reason
    again, created = await retry(service, bench, "r1")
    assert not created and again.approval_id == approval.id
    assert bench.lines() == 0

    await bench.broker.answer(approval.id, approve=True, decided_by="alice")
    await run_worker_until(service, lambda: bench.store.get_invocation(stuck.id).terminal)
    assert bench.store.get_invocation(stuck.id).status == "completed"
    assert bench.lines() == 1


async def test_a_call_the_policy_now_denies_ends_with_the_reason(bench: Bench) -> None:
    stuck = left_undecided(bench, "r1")
    bench.store.add_rule(level="deny", rule="shell__run", created_by="operator")
    service = await restart(bench)
    await run_worker_until(service, lambda: bench.store.get_invocation(stuck.id).terminal)
    denied = bench.store.get_invocation(stuck.id)
    assert denied.status == "denied" and denied.error is not None, denied
    assert denied.error.startswith("denied by Octipus policy") and denied.arguments is None
    (refusal,) = bench.store.list_actions(session_id=bench.session_id)
    assert refusal.outcome == "not_executed" and refusal.origin == "manual"
    again, created = await retry(service, bench, "r1")
    assert not created and again.status == "denied"
    assert bench.lines() == 0


async def test_the_grant_use_is_counted_with_the_decision_so_the_call_left_runs_on_it(bench: Bench) -> None:
    """A grant with one use allows the call a daemon died deciding: the use it was counting was
    not committed without the decision, so deciding again spends it, once."""
    grant = bench.store.create_grant(tool_id="shell__run", level="allow", created_by="operator", max_uses=1)
    stuck = left_undecided(bench, "r1", claim=("token-old", "daemon-old"))
    # the dead daemon's decision cannot be written any more once another daemon holds the claim,
    # and its grant use is not counted either: both commit together or not at all
    assert bench.store.claim_undecided(stuck.id, token="token-mid", owner="daemon-mid")
    with pytest.raises(ConflictError, match="taken over"):
        bench.store.settle_invocation(stuck.id, "approved", token="token-old", grant_id=grant.id)
    assert bench.store.get_grant(grant.id).uses == 0
    service = await restart(bench)
    await run_worker_until(service, lambda: bench.store.get_invocation(stuck.id).terminal)
    assert bench.store.get_invocation(stuck.id).status == "completed"
    assert bench.lines() == 1 and bench.store.get_grant(grant.id).uses == 1


async def test_two_recoverers_decide_an_undecided_call_once(bench: Bench) -> None:
    stuck = left_undecided(bench, "r1")
    first, second = bench.service("daemon-a"), bench.service("daemon-b")
    with anyio.fail_after(WITHIN):
        async with anyio.create_task_group() as tg:
            tg.start_soon(first.recover_undecided)
            tg.start_soon(second.recover_undecided)
    asked = [a for a in bench.store.list_approvals(status="pending") if a.session_id == bench.session_id]
    assert len(asked) == 1, asked
    waiting = bench.store.get_invocation(stuck.id)
    assert waiting.approval_id == asked[0].id and waiting.claim_token is None


async def test_a_call_cancelled_before_its_decision_stays_cancelled(bench: Bench) -> None:
    stuck = left_undecided(bench, "r1")
    bench.store.cancel_invocation(stuck.id, by="alice")
    service = await restart(bench)
    assert await service.recover_undecided() == 0
    assert bench.store.get_invocation(stuck.id).status == "cancelled"
    assert bench.store.list_approvals(status="pending") == []


async def test_an_approval_is_linked_to_its_call_in_one_transaction(bench: Bench) -> None:
    """The approval an ASK stores and the call's link to it commit together: a decision whose claim
    no longer holds (the call was taken over or cancelled) leaves no orphan approval behind."""
    stuck = left_undecided(bench, "r1", claim=("token-old", "daemon-old"))
    assert bench.store.claim_undecided(stuck.id, token="token-new", owner="daemon-new")
    with pytest.raises(ConflictError):
        await bench.broker.create(
            run_id=None,
            session_id=bench.session_id,
            tool_id="shell__run",
            subject=None,
            reason="started by hand by alice",
            input=dict(APPEND),
            explanation="ask",
            vendor_request_id=None,
            invocation=(stuck.id, "token-old"),
        )
    assert bench.store.list_approvals() == []
    assert bench.store.get_invocation(stuck.id).approval_id is None


async def test_the_daemons_own_undecided_call_is_not_taken_by_its_recovery(bench: Bench) -> None:
    mine = left_undecided(bench, "r1", claim=("token-live", "daemon-new"))
    assert bench.store.undecided_invocations(owner="daemon-new") == []
    assert not bench.store.claim_undecided(mine.id, token="other", owner="daemon-new")
    assert [i.id for i in bench.store.undecided_invocations(owner="daemon-later")] == [mine.id]
