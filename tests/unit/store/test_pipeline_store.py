"""The pipeline's public record (issue 27): runs, nodes, attempts, items and history, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError
from octipusd.store import Store
from octipusd.store.pipeline_item_store import MAX_PIPELINE_ITEMS, ItemChanges, ItemDraft
from octipusd.store.pipeline_records import AttemptStatus, ItemStatus, NodeStatus, PipelineStatus
from octipusd.store.pipeline_store import INTERRUPTED_SUMMARY


@pytest.fixture
def store(migrated_store_url: str) -> Iterator[Store]:
    with Store.open(migrated_store_url) as opened:
        yield opened


def _pipeline(store: Store, items: int = 2) -> str:
    session = store.create_session(workspace="/w", adapter="claude-code")
    pipeline = store.create_pipeline(
        session_id=session.id,
        user="ann",
        workspace="/w",
        name="plan-implement-verify",
        template_id=None,
        template={"name": "t", "steps": []},
        params={"goal": "x"},
        graph={"nodes": []},
        nodes=[("n0", "step"), ("n1", "foreach"), ("n2", "step")],
    )
    store.add_pipeline_items(pipeline.id, [ItemDraft(f"item {i}") for i in range(items)], node_key="n0")
    return pipeline.id


def test_create_stores_the_graph_nodes_and_a_created_event(store: Store) -> None:
    pid = _pipeline(store)
    snap = store.pipeline_snapshot(pid)
    assert snap.pipeline.status is PipelineStatus.PLANNING
    assert snap.pipeline.params == {"goal": "x"}
    assert [n.key for n in snap.nodes] == ["n0", "n1", "n2"]
    assert {n.status for n in snap.nodes} == {NodeStatus.PENDING}
    assert [i.title for i in snap.items] == ["item 0", "item 1"]
    assert [e.kind for e in snap.events] == ["created"]
    assert store.has_open_pipelines()
    assert store.pipeline_snapshot(pid, history=False).events == []
    with pytest.raises(NotFoundError, match="pipeline nope not found"):
        store.get_pipeline("nope")


def test_two_concurrent_walk_claims_start_one_walker(store: Store) -> None:
    pid = _pipeline(store)
    store.set_pipeline_status(pid, PipelineStatus.STOPPED)
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def claim(n: int) -> None:
        barrier.wait()
        try:
            store.claim_pipeline_walk(
                pid, expect={PipelineStatus.STOPPED, PipelineStatus.PAUSED}, workflow_id=f"w{n}"
            )
            outcomes.append("won")
        except ConflictError as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes)[-1] == "won" and outcomes.count("won") == 1
    assert "is running: it cannot be resumed now" in next(o for o in outcomes if o != "won")
    after = store.get_pipeline(pid)
    assert after.status is PipelineStatus.RUNNING and after.generation == 1


def test_attempts_number_per_stage_and_item_and_keep_incomplete_text_until_finished(store: Store) -> None:
    pid = _pipeline(store)
    item = store.list_pipeline_items(pid)[0]
    first = store.start_pipeline_attempt(
        pid, node_key="n1", stage="implement", item_id=item.id, start_reason="next item", generation=1
    )
    store.add_attempt_run(first.id, "r1")
    store.save_incomplete_text(first.id, "half of it")
    stopped = store.finish_pipeline_attempt(first.id, AttemptStatus.STOPPED, tokens=10)
    assert stopped.incomplete_text == "half of it" and stopped.run_ids == ["r1"]
    again = store.reopen_pipeline_attempt(first.id, reason="resume")
    assert (
        again.id == first.id
        and again.status is AttemptStatus.RUNNING
        and again.incomplete_text == "half of it"
    )
    done = store.finish_pipeline_attempt(
        first.id, AttemptStatus.SUCCEEDED, result="ok", counters={"changedFiles": 2}, tokens=5
    )
    assert done.incomplete_text is None and done.tokens == 15 and done.counters == {"changedFiles": 2}
    second = store.start_pipeline_attempt(
        pid, node_key="n1", stage="implement", item_id=item.id, start_reason="qa_fail", generation=1
    )
    assert second.number == 2
    assert store.get_pipeline(pid).tokens_used == 15
    events = store.pipeline_events(pid)
    started = [e for e in events if e.kind == "stage_started"]
    assert started[0].item_id == item.id and started[0].attempt_id == first.id
    assert started[0].data["itemTitle"] == "item 0" and started[0].data["reason"] == "next item"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_reconcile_pauses_active_pipelines_once_and_leaves_finished_ones(store: Store) -> None:
    running, done = _pipeline(store), _pipeline(store)
    store.set_pipeline_status(running, PipelineStatus.RUNNING)
    store.set_pipeline_node(running, "n1", NodeStatus.RUNNING)
    attempt = store.start_pipeline_attempt(
        running, node_key="n1", stage="s", item_id=None, start_reason="r", generation=1
    )
    store.set_pipeline_status(done, PipelineStatus.COMPLETED)
    assert store.reconcile_interrupted_pipelines() == [running]
    assert store.reconcile_interrupted_pipelines() == []
    snap = store.pipeline_snapshot(running)
    assert snap.pipeline.status is PipelineStatus.PAUSED and snap.pipeline.summary == INTERRUPTED_SUMMARY
    assert {n.status for n in snap.nodes} == {NodeStatus.PENDING}
    assert snap.attempts[0].id == attempt.id and snap.attempts[0].status is AttemptStatus.INTERRUPTED
    assert store.get_pipeline(done).status is PipelineStatus.COMPLETED


def test_item_changes_are_checked_first_queued_and_applied_in_order(store: Store) -> None:
    pid = _pipeline(store, items=3)
    a, b, c = store.list_pipeline_items(pid)
    with pytest.raises(InvalidRequestError, match=r"skip\[1\]: pipeline .* has no item 'zzz'"):
        store.queue_item_changes(pid, ItemChanges(skip=(a.id, "zzz")))
    assert store.get_pipeline(pid).pending_changes == []
    store.set_pipeline_item(a.id, ItemStatus.DONE, result="kept")
    store.queue_item_changes(
        pid,
        ItemChanges(
            skip=(a.id, b.id),
            add=(ItemDraft("new", acceptance="tests pass"),),
            order=(c.id,),
            evidence="abc123",
        ),
    )
    assert [i.status for i in store.list_pipeline_items(pid)] == [
        ItemStatus.DONE,
        ItemStatus.PENDING,
        ItemStatus.PENDING,
    ]
    applied = store.apply_item_changes(pid)
    assert len(applied) == 1 and store.apply_item_changes(pid) == []
    items = store.list_pipeline_items(pid)
    assert [i.title for i in items] == ["item 2", "item 0", "item 1", "new"]
    by_title = {i.title: i for i in items}
    assert by_title["item 0"].status is ItemStatus.DONE and by_title["item 0"].result == "kept"
    assert by_title["item 1"].status is ItemStatus.SKIPPED and by_title["item 1"].evidence == "abc123"
    assert by_title["new"].acceptance == "tests pass"


def test_queued_additions_count_against_the_item_limit_together(store: Store) -> None:
    pid = _pipeline(store, items=2)
    half = MAX_PIPELINE_ITEMS // 2
    store.queue_item_changes(pid, ItemChanges(add=tuple(ItemDraft(f"a{i}") for i in range(half))))
    with pytest.raises(InvalidRequestError, match=r"^add: .* would hold 502 items with the queued additions"):
        store.queue_item_changes(pid, ItemChanges(add=tuple(ItemDraft(f"b{i}") for i in range(half))))
    assert len(store.get_pipeline(pid).pending_changes) == 1  # the refused change queued nothing
    store.queue_item_changes(pid, ItemChanges(add=tuple(ItemDraft(f"b{i}") for i in range(half - 2))))
    store.apply_item_changes(pid)
    assert len(store.list_pipeline_items(pid)) == MAX_PIPELINE_ITEMS


def test_the_active_item_cannot_be_skipped_while_running(store: Store) -> None:
    pid = _pipeline(store)
    item = store.list_pipeline_items(pid)[0]
    store.set_pipeline_status(pid, PipelineStatus.RUNNING, current_item_id=item.id)
    with pytest.raises(ConflictError, match="stop the pipeline before skipping it"):
        store.queue_item_changes(pid, ItemChanges(skip=(item.id,)))
    store.set_pipeline_status(pid, PipelineStatus.STOPPED)
    store.queue_item_changes(pid, ItemChanges(skip=(item.id,)))


def test_skip_items_checks_every_id_before_skipping_any(store: Store) -> None:
    pid = _pipeline(store)
    a, _b = store.list_pipeline_items(pid)
    with pytest.raises(InvalidRequestError, match=r"skipItems\[1\]"):
        store.skip_pipeline_items(pid, [a.id, "nope"], evidence="e")
    assert store.list_pipeline_items(pid)[0].status is ItemStatus.PENDING
    assert [i.id for i in store.skip_pipeline_items(pid, [a.id], evidence="commit 1")] == [a.id]


def test_added_items_skip_known_titles_and_respect_the_limit(store: Store) -> None:
    pid = _pipeline(store)
    added = store.add_pipeline_items(pid, [ItemDraft("item 0"), ItemDraft("fresh")], skip_known_titles=True)
    assert [i.title for i in added] == ["fresh"]
    with pytest.raises(InvalidRequestError, match=r"add\[0\]\.title: must be a non-empty string"):
        store.add_pipeline_items(pid, [ItemDraft("  ")])
    with pytest.raises(InvalidRequestError, match="over the limit"):
        store.add_pipeline_items(pid, [ItemDraft(f"x{i}") for i in range(MAX_PIPELINE_ITEMS)])
    assert len(store.list_pipeline_items(pid)) == 3
