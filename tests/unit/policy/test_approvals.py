"""The approval broker's waits end when their run ends: by its cancel (one store transaction), or by
the run's final status, which cancels its pending approvals itself."""

from __future__ import annotations

import anyio
import pytest

from octipusd.policy.approvals import ApprovalBroker, ApprovalResult, Outcome
from octipusd.store.records import Approval, ApprovalStatus, RunStatus
from octipusd.store.repository import Store

pytestmark = pytest.mark.anyio

WITHIN = 5.0


async def _ask(broker: ApprovalBroker, store: Store, run_id: str) -> Approval:
    run = store.get_run(run_id)
    return await broker.create(
        run_id=run.id,
        session_id=run.session_id,
        tool_id="cli-native:Bash",
        subject="rm -rf build",
        reason="deletes files",
        input={"command": "rm -rf build"},
        explanation=None,
        vendor_request_id=None,
    )


async def test_a_runs_end_wakes_its_waits_and_no_other(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code")
    runs = [store.create_run(session_id=session.id, prompt="p", owner="me").id for _ in range(3)]
    broker = ApprovalBroker(store, timeout_seconds=60)
    approvals = [await _ask(broker, store, run) for run in runs]
    results: dict[str, ApprovalResult] = {}

    async def wait(approval: Approval) -> None:
        results[approval.id] = await broker.wait(approval)

    with anyio.fail_after(WITHIN):
        async with anyio.create_task_group() as tg:
            for approval in approvals:
                tg.start_soon(wait, approval)
            await anyio.sleep(0.05)
            assert await broker.cancel_run(runs[0], "stopped by a person") == 1
            # the final status cancels the approvals; the waits open before it are then set
            waiting = broker.waits_of(runs[1])
            assert len(waiting) == 1
            store.finish_run(runs[1], status=RunStatus.FAILED, approvals_reason="the run ended (failed)")
            for event in waiting:
                event.set()
            while len(results) < 2:  # noqa: ASYNC110 - the woken waits read their approvals back
                await anyio.sleep(0.01)
            await anyio.sleep(0.05)
            assert set(results) == {approvals[0].id, approvals[1].id}  # the third run's wait goes on
            await broker.answer(approvals[2].id, approve=True, decided_by="me")
    first, second, third = (results[a.id] for a in approvals)
    assert first.outcome is Outcome.CANCELLED and first.approval.decision_reason == "stopped by a person"
    assert second.outcome is Outcome.CANCELLED
    assert second.approval.decision_reason == "the run ended (failed)"
    assert third.outcome is Outcome.APPROVED
    assert store.get_approval(approvals[2].id).status is ApprovalStatus.APPROVED
    assert broker.waits_of(runs[2]) == []  # a finished wait is forgotten
