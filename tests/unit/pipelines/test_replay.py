"""The pipeline replay review hook (seed 000 "Pipeline resume and rewind"), on both backends."""

from __future__ import annotations

import anyio
import pytest

from octipusd.errors import ConflictError
from octipusd.pipelines.replay import MISSING_RECORDS_WARNING, ReplayReviews
from octipusd.policy.approvals import ApprovalBroker
from octipusd.store import Store

pytestmark = pytest.mark.anyio


def _action(store: Store, session_id: str, pipeline_id: str, outcome: str = "completed") -> str:
    record = store.start_action(
        user="alice",
        session_id=session_id,
        run_id=None,
        agent="worker",
        origin="agent",
        tool="shell__run",
        args_hash="0" * 64,
        risk_class="containable",
        owner="test",
        deadline_seconds=60.0,
        pipeline_id=pipeline_id,
        node_id="n1",
    )
    store.finish_action(record.id, outcome=outcome, detail=None)
    return record.id


async def _pending(store: Store) -> str:
    with anyio.fail_after(10):
        while True:
            items = [a for a in store.list_approvals(status="pending") if a.kind == "pipeline_replay"]
            if items:
                return items[0].id
            await anyio.sleep(0.02)


async def test_a_pipeline_paused_before_any_stage_needs_no_review(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code")
    reviews = ReplayReviews(store, ApprovalBroker(store, 30))
    decision = await reviews.review(
        pipeline_id="p1", session_id=session.id, user="alice", attended=True, has_previous_execution=False
    )
    assert decision.allowed and decision.approval_id is None
    assert store.list_approvals() == []


@pytest.mark.parametrize("approve", [True, False])
async def test_replay_review_covers_prior_records_and_warns(store: Store, approve: bool) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code")
    ids = [_action(store, session.id, "p1"), _action(store, session.id, "p1", "uncertain")]
    _action(store, session.id, "other")
    broker = ApprovalBroker(store, 30)
    reviews = ReplayReviews(store, broker)
    results = []

    async def resume() -> None:
        results.append(
            await reviews.review(
                pipeline_id="p1",
                session_id=session.id,
                user="alice",
                attended=True,
                has_previous_execution=True,
            )
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(resume)
        approval_id = await _pending(store)
        approval = store.get_approval(approval_id)
        assert approval.subject == "Review pipeline replay"
        assert sorted(approval.action_ids) == sorted(ids)
        assert MISSING_RECORDS_WARNING in (approval.explanation or "")
        assert approval.run_id is None
        # a concurrent resume cannot start a second walker while the first awaits review
        with pytest.raises(ConflictError, match="awaiting its replay review"):
            await reviews.review(
                pipeline_id="p1",
                session_id=session.id,
                user="alice",
                attended=True,
                has_previous_execution=True,
            )
        await broker.answer(approval_id, approve=approve, decided_by="bob")
    [decision] = results
    assert decision.allowed is approve and decision.action_count == 2
    if not approve:
        assert "checkpoints are unchanged" in decision.reason
    # a replay review acknowledges nothing: the uncertain record stays unresolved
    assert store.get_action(ids[1]).review_id is None


async def test_unattended_work_cannot_approve_its_own_replay(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code")
    _action(store, session.id, "p1")
    reviews = ReplayReviews(store, ApprovalBroker(store, 30))
    decision = await reviews.review(
        pipeline_id="p1", session_id=session.id, user="alice", attended=False, has_previous_execution=True
    )
    assert not decision.allowed and "review required" in decision.reason
    assert store.list_approvals() == []
