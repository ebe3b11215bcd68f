"""Every approval a pipeline asks with no run of its own notifies like a run's (seed 003: "raised
again as a normal permission request (approval prompt and push notification)"; issue 28 review): a
stage approval and a replay review reach the notifier's targets with the approval's page link, on
the real walk, store (SQLite and PostgreSQL), broker, durable engine and a loopback target."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

from octipusd.app_pipelines import notify_pipelines
from octipusd.notify import Notifier
from octipusd.pipelines.service import ResumeRequest
from octipusd.settings_notify import NotifySettings
from octipusd.store.pipeline_records import PipelineStatus
from tests.unit.notify.receiver import Receiver
from tests.unit.pipelines.conftest import USER, PipelineRig
from tests.unit.pipelines.test_stage_approval import GATED, planner

pytestmark = pytest.mark.anyio

P = PipelineStatus
PAGE = "https://octipus.example:8443"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


@pytest.fixture
async def notifier(pipelines: PipelineRig, receiver: Receiver) -> AsyncIterator[Notifier]:
    url = f"json://127.0.0.1:{receiver.port}/"
    made = Notifier(NotifySettings(urls=(url,), backoffSeconds=0.1), pipelines.store, lambda p: f"{PAGE}{p}")
    notify_pipelines(pipelines.walker, pipelines.runner, made)
    async with anyio.create_task_group() as tg:
        await tg.start(made.run)
        yield made
        await made.close()


async def received(receiver: Receiver, count: int) -> list[str]:
    """The bodies of the first ``count`` notifications (waits for them, bounded)."""
    with anyio.fail_after(60):
        while len(receiver.received) < count:  # noqa: ASYNC110 - the receiver is a thread
            await anyio.sleep(0.05)
    return [str(m.get("message") or m.get("body")) for m in receiver.received]


async def test_a_stage_approval_and_a_replay_review_notify_with_their_page(
    pipelines: PipelineRig, notifier: Notifier, receiver: Receiver
) -> None:
    pipelines.model.decide = planner
    created = await pipelines.create(GATED, params={"word": "hi"})
    asking = await pipelines.wait(created.id, P.AWAITING_APPROVAL, P.FAILED, P.COMPLETED)
    assert asking.status is P.AWAITING_APPROVAL, asking.error
    stage = pipelines.status(created.id)["pendingApproval"]["requestId"]
    (first,) = await received(receiver, 1)
    assert f"Pipeline {created.id} 'gated'" in first and "waits for your approval" in first
    assert f"Open: {PAGE}/approvals/{stage}" in first

    await pipelines.broker.answer(stage, approve=False, decided_by=USER)
    await pipelines.wait(created.id, P.STOPPED, P.FAILED, P.COMPLETED)
    answer = await pipelines.service.resume(created.id, pipelines.caller, ResumeRequest())
    review = answer["pendingApproval"]["requestId"]  # the plan ran: a replay review first
    bodies = await received(receiver, 2)
    assert f"Open: {PAGE}/approvals/{review}" in bodies[1] and "Review pipeline replay" in bodies[1]
