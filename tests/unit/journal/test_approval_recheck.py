"""The answer to an approval learns what the rules said when they were checked again (issue 14
item 4), on the store (SQLite and PostgreSQL) with the real gate and broker; and a caller that goes
away during the approval leaves it listed on its own context (CallContext.approvals)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import anyio
import pytest

from tests.unit.journal.conftest import WITHIN, start

if TYPE_CHECKING:
    from tests.unit.journal.conftest import Bench

pytestmark = pytest.mark.anyio

CALL = {"command": "touch made.txt"}  # no built-in rule allows it: shell__run asks


async def _pending(bench: Bench) -> str:
    with anyio.fail_after(WITHIN):
        while not (pending := bench.store.list_approvals(status="pending", run_id=bench.run_id)):  # noqa: ASYNC110
            await anyio.sleep(0.01)
    return pending[0].id


async def test_an_approval_revoked_meanwhile_is_reported_denied(bench: Bench) -> None:
    async with anyio.create_task_group() as tg:
        waiting = start(tg, lambda: bench.gate.decide(bench.ctx(), "shell__run", CALL))
        approval_id = await _pending(bench)
        bench.store.add_rule(level="deny", rule="shell__run", created_by="operator")
        decided = await bench.broker.decide(
            approval_id, approve=True, decided_by="bob", recheck_seconds=WITHIN
        )
        result = await waiting.result()
    assert decided.approval.status == "approved"
    assert decided.recheck is not None and not decided.recheck.allowed
    assert "deny by rule shell__run" in decided.recheck.reason and not result.allowed
    assert decided.recheck.reason == result.reason


async def test_an_approval_that_stands_is_reported_allowed(bench: Bench) -> None:
    async with anyio.create_task_group() as tg:
        waiting = start(tg, lambda: bench.gate.decide(bench.ctx(), "shell__run", CALL))
        approval_id = await _pending(bench)
        decided = await bench.broker.decide(
            approval_id, approve=True, decided_by="bob", recheck_seconds=WITHIN
        )
        assert (await waiting.result()).allowed
    assert decided.recheck is not None and decided.recheck.allowed


async def test_a_cancelled_wait_leaves_its_approval_on_the_callers_context(bench: Bench) -> None:
    ctx = dataclasses.replace(bench.ctx(), approvals=[])
    async with anyio.create_task_group() as tg:
        tg.start_soon(bench.gate.decide, ctx, "shell__run", CALL)
        approval_id = await _pending(bench)
        with anyio.fail_after(WITHIN):
            while not ctx.approvals:  # noqa: ASYNC110 - listed once the wait begins
                await anyio.sleep(0.01)
        assert ctx.approvals == [approval_id]
        tg.cancel_scope.cancel()
    assert ctx.approvals == [approval_id]
    assert bench.store.get_approval(approval_id).status == "cancelled"
