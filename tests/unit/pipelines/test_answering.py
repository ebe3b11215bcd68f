"""``answer_pipeline_approval({id})`` (issue 28 item 3) through the bridge tool, the pipelines' service
and the real approval broker and store (SQLite, PostgreSQL): the pending approval is forwarded to the
person in the calling run's conversation; their explicit answer comes back with the command, request
id, deciding user and time (an approval also writes the allowance, so the walk resumes the stage);
no answer within the limit answers ``decided: false`` and leaves the approval pending.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest

from octipusd.bridge.fakes import FakeToolHost
from octipusd.errors import ConflictError
from octipusd.pipelines.answering import AnswerLimits
from octipusd.pipelines.service import PipelineService
from octipusd.policy.approvals import ApprovalBroker
from octipusd.store.records import ApprovalStatus
from octipusd.toolkit import RunIdentity
from octipusd.tools import PIPELINE_TOOLS
from tests.unit.pipelines.test_approved_calls import Bench, Recorder, bench

__all__ = ["bench"]

pytestmark = pytest.mark.anyio

TOOL = next(t for t in PIPELINE_TOOLS if t.name == "answer_pipeline_approval")
#: Longest wait for the forwarded question in a test (seconds).
WITHIN = 15.0


class Announced(Recorder):
    """The service's ``announce``: records, and sets :attr:`forwarded` at the first announcement."""

    def __init__(self) -> None:
        super().__init__()
        self.forwarded = anyio.Event()

    async def __call__(self, run_id: str, kind: str, data: dict[str, Any]) -> None:
        await super().__call__(run_id, kind, data)
        self.forwarded.set()


def setup(
    bench: Bench, limits: AnswerLimits | None = None
) -> tuple[PipelineService, ApprovalBroker, Announced]:
    service = PipelineService(bench.store)
    if limits is not None:
        service.answers.limits = limits
    announced = Announced()
    service.answers.announce = announced
    broker = ApprovalBroker(bench.store, timeout_seconds=30.0)
    broker.add_listener(service.answers.on_decided)
    return service, broker, announced


def root(bench: Bench) -> RunIdentity:
    root_run = bench.store.create_run(session_id=bench.session_id, prompt="coordinate", owner="test")
    return RunIdentity(
        run_id=root_run.id,
        session_id=bench.session_id,
        user="ann",
        worker_id="w1",
        workspace=Path(bench.workspace),
        attended=True,
    )


async def test_the_persons_answer_comes_back_and_allows_the_call(bench: Bench) -> None:
    request = await bench.raise_again(bench.blocked(bench.run))
    service, broker, announced = setup(bench)
    who = root(bench)
    results: list[dict[str, Any]] = []

    async def ask() -> None:
        results.append(await TOOL.handler(who, FakeToolHost(pipelines=service), {"id": bench.pipeline_id}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        with anyio.fail_after(WITHIN):
            await announced.forwarded.wait()
        (forwarded,) = announced.of("approval_requested")
        assert announced.events[0][0] == who.run_id  # shown in the caller's conversation
        assert forwarded["approval_id"] == request and forwarded["subject"] == "npm test"
        await broker.decide(request, approve=True, decided_by="ann via phone")
    (answer,) = results
    assert answer["decided"] is True and answer["decision"] == "approve", answer
    assert (answer["requestId"], answer["command"], answer["decidedBy"]) == (
        request,
        "npm test",
        "ann via phone",
    )
    assert answer["decidedAt"]
    assert bench.metadata()["approvedCalls"][0]["approvalId"] == request


async def test_no_answer_in_time_leaves_the_approval_pending(bench: Bench) -> None:
    request = await bench.raise_again(bench.blocked(bench.run))
    service, _broker, announced = setup(bench, AnswerLimits(wait_s=0.3, poll_s=0.1))
    answer = await TOOL.handler(root(bench), FakeToolHost(pipelines=service), {"id": bench.pipeline_id})
    assert answer["decided"] is False and answer["decision"] is None and answer["requestId"] == request
    assert "stays pending" in answer["message"]
    assert bench.store.get_approval(request).status is ApprovalStatus.PENDING  # never a denial
    assert bench.metadata()["pendingApproval"]["requestId"] == request
    assert announced.of("approval_requested")


async def test_a_pipeline_without_a_pending_approval_is_refused(bench: Bench) -> None:
    service, _broker, _announced = setup(bench)
    with pytest.raises(ConflictError, match="no pending approval"):
        await TOOL.handler(root(bench), FakeToolHost(pipelines=service), {"id": bench.pipeline_id})


async def test_an_unattended_caller_does_not_wait(bench: Bench) -> None:
    request = await bench.raise_again(bench.blocked(bench.run))
    service, _broker, announced = setup(bench)
    who = dataclasses.replace(root(bench), attended=False)  # a schedule's or a monitor's turn
    answer = await TOOL.handler(who, FakeToolHost(pipelines=service), {"id": bench.pipeline_id})
    assert answer["decided"] is False and answer["requestId"] == request
    assert bench.store.get_approval(request).status is ApprovalStatus.PENDING
    assert announced.of("approval_requested")  # the person is still told
