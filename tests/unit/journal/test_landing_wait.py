"""An approved repeat waits while the request it may repeat can still land (issue 26 item 5).

A hand-started call without an idempotency key, approved through the recovery review of an
earlier uncertain action whose request may still land (before its in-flight bound, its transport
not ended), would land beside it if it ran at once. The review says until when
(``waits_until``); the approved call waits until then, through a restart (the wait is computed
from the journal), unless the person approved it with run now. The store's clock is a fake one
moved by the test, so "until then" is a stored time, never a race with the wall clock.
:class:`ActionService` and :class:`RecoveryWorker` on SQLite and PostgreSQL, ``shell__run`` for
real, counted in the ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from octipusd.journal.operator import in_flight_time
from octipusd.journal.review import RUN_NOW
from octipusd.runtime.actions import ActionService
from octipusd.store import Store
from octipusd.store.invocation_store import ToolInvocation
from tests.unit.journal.conftest import LEDGER, WITHIN

if TYPE_CHECKING:
    from tests.unit.journal.conftest import Bench

pytestmark = pytest.mark.anyio

#: How long the earlier action's request may still land (seconds of the fake clock).
IN_FLIGHT_SECONDS = 3600.0
REPEAT = {"command": f"echo repeat >> {LEDGER}"}


class Clock:
    """The real time shifted by :attr:`ahead` (the test moves it forward)."""

    def __init__(self) -> None:
        self.ahead = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.ahead


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(migrated_store_url: str, clock: Clock) -> Iterator[Store]:
    opened = Store.open(migrated_store_url, clock=clock)
    try:
        yield opened
    finally:
        opened.close()


async def until(predicate: Callable[[], Any]) -> Any:
    with anyio.fail_after(WITHIN):
        while not (found := predicate()):  # noqa: ASYNC110 - a row has no event to wait on
            await anyio.sleep(0.02)
    return found


async def reviewed_repeat(bench: Bench, service: ActionService) -> tuple[ToolInvocation, str]:
    """Submit the repeat; it waits for the recovery review of the earlier action (its id returned)."""
    bench.store.add_rule(level="allow", rule="shell__run", created_by="operator")
    earlier = bench.uncertain(in_flight_seconds=IN_FLIGHT_SECONDS)
    repeat, created = await service.submit(
        user="alice", session_id=bench.session_id, tool="shell__run", arguments=dict(REPEAT), request_id="r2"
    )
    assert created and repeat.status == "awaiting_approval" and repeat.approval_id is not None
    return repeat, earlier.id


def waiting(bench: Bench, invocation_id: str) -> ToolInvocation | None:
    current = bench.store.get_invocation(invocation_id)
    return current if current.status == "approved" and "waits until" in (current.error or "") else None


def redeferred(bench: Bench, before: ToolInvocation) -> bool:
    """A later dispatch tried ``before`` again and handed it back to wait."""
    now = waiting(bench, before.id)
    return now is not None and now.updated_at > before.updated_at


async def test_the_review_says_until_when_and_the_approved_repeat_waits_until_then(
    bench: Bench, clock: Clock
) -> None:
    service = bench.service()
    repeat, earlier_id = await reviewed_repeat(bench, service)
    assert repeat.approval_id is not None
    review = bench.store.get_approval(repeat.approval_id)
    earlier = bench.store.get_action(earlier_id)
    assert earlier.in_flight_until is not None
    shown = in_flight_time(earlier.in_flight_until)
    assert review.kind == "action_recovery" and review.input["waits_until"] == shown
    assert f"only after {shown}" in review.input["note"] and "--run-now" in review.input["note"]

    with anyio.fail_after(WITHIN):
        async with anyio.create_task_group() as tg:
            await tg.start(service.worker.run)
            await bench.broker.answer(review.id, approve=True, decided_by="alice")
            held = await until(lambda: waiting(bench, repeat.id))
            assert held.error is not None and f"waits until {shown}" in held.error
            assert held.claim_token is None and bench.lines() == 0
            passes = service.worker.passes
            service.worker.signal_user("alice")  # another pass before the bound: it still waits
            await until(lambda: service.worker.passes > passes and redeferred(bench, held))
            assert bench.lines() == 0

            clock.ahead = timedelta(seconds=IN_FLIGHT_SECONDS + 1)  # the earlier request can no longer land
            service.worker.signal_user("alice")
            done = await until(lambda: (i := bench.store.get_invocation(repeat.id)).terminal and i)
            tg.cancel_scope.cancel()
    assert done.status == "completed", done
    assert bench.lines() == 1
    ran = bench.store.get_action(done.action_id or "")
    assert ran.started_at >= earlier.in_flight_until  # it started once nothing could land beside it


async def test_run_now_runs_the_approved_repeat_at_once(bench: Bench) -> None:
    service = bench.service()
    repeat, _ = await reviewed_repeat(bench, service)
    assert repeat.approval_id is not None
    with anyio.fail_after(WITHIN):
        async with anyio.create_task_group() as tg:
            await tg.start(service.worker.run)
            await bench.broker.decide(
                repeat.approval_id, approve=True, decided_by="alice", answers={RUN_NOW: True}
            )
            done = await until(lambda: (i := bench.store.get_invocation(repeat.id)).terminal and i)
            tg.cancel_scope.cancel()
    assert done.status == "completed" and bench.lines() == 1


async def approved_and_waiting(bench: Bench) -> tuple[ActionService, ToolInvocation, str]:
    """The repeat approved through its review (without run now) and dispatched once: it waits."""
    service = bench.service()
    repeat, earlier_id = await reviewed_repeat(bench, service)
    assert repeat.approval_id is not None
    await bench.broker.answer(repeat.approval_id, approve=True, decided_by="alice")
    assert await service.dispatch(repeat.id) is True
    held = waiting(bench, repeat.id)
    assert held is not None and bench.lines() == 0
    return service, held, earlier_id


async def test_the_wait_survives_a_restart(bench: Bench, clock: Clock) -> None:
    _, held, _ = await approved_and_waiting(bench)
    repeat = held

    bench.store.close()  # the daemon stops; the next one opens the same database
    bench.store = Store.open(bench.url, clock=clock)
    bench.build("daemon-2")
    again = bench.service("daemon-2", journal=bench.journal)
    with anyio.fail_after(WITHIN):
        async with anyio.create_task_group() as tg:
            await tg.start(again.worker.run)  # start-up discovery: the owed repeat is tried, and waits
            await until(lambda: redeferred(bench, held))
            assert bench.lines() == 0
            clock.ahead = timedelta(seconds=IN_FLIGHT_SECONDS + 1)
            again.worker.signal_user("alice")
            done = await until(lambda: (i := bench.store.get_invocation(repeat.id)).terminal and i)
            tg.cancel_scope.cancel()
    assert done.status == "completed" and bench.lines() == 1


async def test_an_ended_transport_ends_the_wait(bench: Bench) -> None:
    """Once Octipus has ended the earlier request's transport (e.g. terminated its MCP session at
    restart), nothing can land beside the repeat: it runs without waiting for the bound."""
    service, repeat, earlier_id = await approved_and_waiting(bench)
    bench.store.end_dispatch(earlier_id, data={"evidence": "ended session"})
    assert await service.dispatch(repeat.id) is True
    assert bench.store.get_invocation(repeat.id).status == "completed" and bench.lines() == 1


async def test_a_waiting_repeat_can_be_cancelled(bench: Bench) -> None:
    service, repeat, _ = await approved_and_waiting(bench)
    cancelled = bench.store.cancel_invocation(repeat.id, by="alice")
    assert cancelled.status == "cancelled"
    assert await service.dispatch(repeat.id) is False and bench.lines() == 0
