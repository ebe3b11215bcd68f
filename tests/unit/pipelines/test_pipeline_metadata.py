"""A pipeline's ``metadata`` is changed key by key under its row lock (issue 28 review): a walk's
write of ``pendingApproval`` and a decision's ``approvedGateCommands`` / ``approvedCalls``, landing
in between, both survive (SQLite and PostgreSQL); what people approved ahead (the approved calls and
the approved gate commands alike) ends when the pipeline is completed, failed or stopped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from octipusd.pipelines.asking import Questions
from octipusd.pipelines.replay import WITHOUT_REVIEW
from octipusd.store import Store
from octipusd.store.pipeline_records import (
    APPROVED_CALLS_KEY,
    APPROVED_GATE_COMMANDS_KEY,
    BLOCKED_CALL_KEY,
    PENDING_APPROVAL_KEY,
    REPLAY_REVIEW_KEY,
    MetadataPatch,
    Pipeline,
    PipelineStatus,
)
from tests.unit.pipelines.test_gate_commands import running_pipeline, stage_approval

pytestmark = pytest.mark.anyio


def interleaving(
    store: Store, monkeypatch: pytest.MonkeyPatch, concurrent: Callable[[], object]
) -> list[int]:
    """Run ``concurrent`` (another writer's transaction) right after the next read of the pipeline, as
    a decision committed while the walk is between its read and its write would. Returns the list
    recording that it ran (empty: the writer under test read nothing; the caller runs it first)."""
    ran: list[int] = []
    read = store.get_pipeline

    def read_then_another_writer(pipeline_id: str) -> Pipeline:
        found = read(pipeline_id)
        if not ran:
            ran.append(1)
            concurrent()
        return found

    monkeypatch.setattr(store, "get_pipeline", read_then_another_writer)
    return ran


async def test_a_walks_question_and_a_concurrent_decision_both_survive(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = running_pipeline(store)
    approval = stage_approval(store, pipeline)
    ran = interleaving(
        store, monkeypatch, lambda: store.decide_approval(approval, approve=True, decided_by="ann")
    )
    pending = {"requestId": "q1", "reason": "retries ran out"}
    await Questions(store).wait_for_person(
        pipeline.id, "n2", pending, {BLOCKED_CALL_KEY: {"approvalId": "q1"}}
    )
    monkeypatch.undo()
    if not ran:
        store.decide_approval(approval, approve=True, decided_by="ann")
    metadata = store.get_pipeline(pipeline.id).metadata
    assert metadata[PENDING_APPROVAL_KEY] == pending
    assert metadata[BLOCKED_CALL_KEY] == {"approvalId": "q1"}
    assert [e["approvalId"] for e in metadata[APPROVED_GATE_COMMANDS_KEY]] == [approval, approval]


async def test_an_answer_clears_its_question_and_keeps_a_concurrent_decisions_key(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = running_pipeline(store)
    await Questions(store).wait_for_person(pipeline.id, "n2", {"requestId": "q1", "reason": "r"})
    approval = stage_approval(store, pipeline)
    ran = interleaving(
        store, monkeypatch, lambda: store.decide_approval(approval, approve=True, decided_by="ann")
    )
    await Questions(store).answered(
        pipeline.id, "n2", None, {"approved": True, "approvalId": "q1", "by": "ann"}
    )
    monkeypatch.undo()
    if not ran:
        store.decide_approval(approval, approve=True, decided_by="ann")
    found = store.get_pipeline(pipeline.id)
    assert found.status is PipelineStatus.RUNNING
    assert PENDING_APPROVAL_KEY not in found.metadata
    assert len(found.metadata[APPROVED_GATE_COMMANDS_KEY]) == 2


def test_a_patch_sets_and_drops_keys_of_the_row_as_it_is(store: Store) -> None:
    pipeline = running_pipeline(store)
    store.update_pipeline(pipeline.id, metadata=MetadataPatch(put={"a": 1, REPLAY_REVIEW_KEY: {"x": 1}}))
    store.update_pipeline(pipeline.id, metadata=MetadataPatch(put={"b": 2}))
    store.update_pipeline(pipeline.id, metadata=WITHOUT_REVIEW)
    assert store.get_pipeline(pipeline.id).metadata == {"a": 1, "b": 2}
    restore = MetadataPatch.restoring({"a": 5}, ("a", "b"))
    store.update_pipeline(pipeline.id, metadata=restore)
    assert store.get_pipeline(pipeline.id).metadata == {"a": 5}


@pytest.mark.parametrize("end", [PipelineStatus.COMPLETED, PipelineStatus.FAILED, PipelineStatus.STOPPED])
def test_every_allowance_ends_with_the_run_and_a_paused_one_keeps_them(
    store: Store, end: PipelineStatus
) -> None:
    pipeline = running_pipeline(store)
    store.decide_approval(stage_approval(store, pipeline), approve=True, decided_by="ann")
    calls: dict[str, Any] = {APPROVED_CALLS_KEY: [{"approvalId": "c"}], BLOCKED_CALL_KEY: {"approvalId": "d"}}
    store.update_pipeline(pipeline.id, metadata=MetadataPatch(put=calls))
    store.set_pipeline_status(pipeline.id, PipelineStatus.PAUSED)  # a restart: kept for the resume
    kept = store.get_pipeline(pipeline.id).metadata
    assert {APPROVED_CALLS_KEY, APPROVED_GATE_COMMANDS_KEY, BLOCKED_CALL_KEY} <= set(kept)
    # an end drops both, even one written with the end itself; the blocked call's question stays open
    ended = store.set_pipeline_status(pipeline.id, end, metadata=MetadataPatch(put={APPROVED_CALLS_KEY: [1]}))
    assert APPROVED_CALLS_KEY not in ended.metadata
    assert APPROVED_GATE_COMMANDS_KEY not in ended.metadata
    assert ended.metadata[BLOCKED_CALL_KEY] == {"approvalId": "d"}
