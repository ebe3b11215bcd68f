"""The pipelines service's reads (issue 27 item 5): the status document, ownership, and the status
timeout when storage cannot answer; on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import anyio
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from octipusd.errors import ForbiddenError, InvalidRequestError, StoreError
from octipusd.pipelines.service import PipelineCaller, PipelineLimits, PipelineService
from octipusd.store import Store
from octipusd.store.pipeline_item_store import ItemChanges, ItemDraft
from octipusd.store.pipeline_records import AttemptStatus, PipelineStatus

ANN = PipelineCaller(user="ann")


@pytest.fixture
def store(migrated_store_url: str) -> Iterator[Store]:
    with Store.open(migrated_store_url) as opened:
        yield opened


def _pipeline(store: Store) -> tuple[str, str]:
    session = store.create_session(workspace="/w", adapter="claude-code")
    pipeline = store.create_pipeline(
        session_id=session.id,
        user="ann",
        workspace="/w",
        name="review",
        template_id=None,
        template={"name": "review", "steps": []},
        params={},
        graph={"nodes": [{"key": "n0", "name": "plan"}, {"key": "n1", "name": "implement"}]},
        nodes=[("n0", "step"), ("n1", "foreach")],
    )
    return pipeline.id, session.id


def test_status_lists_items_with_their_stages_and_the_incomplete_attempt(store: Store) -> None:
    pid, session = _pipeline(store)
    one, two = store.add_pipeline_items(
        pid, [ItemDraft("one", acceptance="ok"), ItemDraft("two")], node_key="n0"
    )
    first = store.start_pipeline_attempt(
        pid, node_key="n1", stage="implement", item_id=one.id, start_reason="next item", generation=1
    )
    store.finish_pipeline_attempt(
        first.id, AttemptStatus.FAILED, error="no files", retry_reason="producesArtifacts: 0 changed files"
    )
    second = store.start_pipeline_attempt(
        pid, node_key="n1", stage="implement", item_id=one.id, start_reason="contract retry", generation=1
    )
    store.save_incomplete_text(second.id, "halfway")
    store.finish_pipeline_attempt(second.id, AttemptStatus.STOPPED)
    service = PipelineService(store)
    doc = anyio.run(
        lambda: service.status(pid, PipelineCaller(user="ann", session_id=session, workspace="/w"))
    )
    assert doc["status"] == "planning" and [s["name"] for s in doc["stages"]] == ["plan", "implement"]
    item = doc["items"][0]
    assert item["title"] == "one" and item["acceptance"] == "ok"
    assert item["stages"][0]["retryReasons"] == ["producesArtifacts: 0 changed files"]
    assert [a["number"] for a in item["stages"][0]["attempts"]] == [1, 2]
    assert doc["incompleteAttempt"] == {
        "id": second.id,
        "node": "n1",
        "stage": "implement",
        "itemId": one.id,
        "number": 2,
        "status": "stopped",
        "text": "halfway",
    }
    assert doc["remainingItems"] == [one.id, two.id]
    assert [e["kind"] for e in doc["history"]][:1] == ["created"]
    started = [e for e in doc["history"] if e["kind"] == "stage_started"]
    assert started[0]["itemId"] == one.id and started[0]["attemptId"] == first.id
    assert "history" not in anyio.run(lambda: service.status(pid, ANN, include_history=False))


def test_another_user_or_session_is_refused(store: Store) -> None:
    pid, session = _pipeline(store)
    service = PipelineService(store)
    with pytest.raises(ForbiddenError, match="another user"):
        anyio.run(lambda: service.status(pid, PipelineCaller(user="bob")))
    with pytest.raises(ForbiddenError, match="another session or workspace"):
        anyio.run(lambda: service.status(pid, PipelineCaller(user="ann", session_id="other", workspace="/w")))
    with pytest.raises(ForbiddenError, match="another session or workspace"):
        anyio.run(
            lambda: service.status(
                pid, PipelineCaller(user="ann", session_id=session, workspace="/elsewhere")
            )
        )
    assert [p["id"] for p in anyio.run(lambda: service.list(ANN))] == [pid]
    assert anyio.run(lambda: service.list(PipelineCaller(user="bob"))) == []


def test_update_items_queues_for_the_boundary_and_names_an_unknown_id(store: Store) -> None:
    pid, _ = _pipeline(store)
    store.add_pipeline_items(pid, [ItemDraft("one")])
    service = PipelineService(store)
    with pytest.raises(InvalidRequestError, match=r"order\[0\]: pipeline .* has no item 'x'"):
        anyio.run(lambda: service.update_items(pid, ANN, ItemChanges(order=("x",))))
    answer = anyio.run(lambda: service.update_items(pid, ANN, ItemChanges(add=(ItemDraft("two"),))))
    assert answer["queued"][0]["add"][0]["title"] == "two" and answer["queued"][0]["user"] == "ann"
    assert [i.title for i in store.list_pipeline_items(pid)] == ["one"]


def test_a_status_read_fails_when_storage_cannot_answer(store: Store, migrated_store_url: str) -> None:
    pid, _ = _pipeline(store)
    service = PipelineService(store, limits=PipelineLimits(status_timeout_s=1.0))
    url = make_url(migrated_store_url)
    if url.get_backend_name() == "sqlite":
        store.engine.dispose()  # the store's pooled connections would keep the lock from being taken
        holder = sqlite3.connect(str(url.database), isolation_level=None)
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        release = holder.close
    else:
        engine = sa.create_engine(migrated_store_url)
        conn = engine.connect()
        conn.execute(sa.text("LOCK TABLE pipelines IN ACCESS EXCLUSIVE MODE"))

        def release() -> None:
            conn.rollback()
            conn.close()
            engine.dispose()

    try:
        with pytest.raises(StoreError):  # past the status timeout, or the database's own lock timeout
            anyio.run(lambda: service.status(pid, ANN))
    finally:
        release()
    assert anyio.run(lambda: service.status(pid, ANN))["status"] == PipelineStatus.PLANNING.value


def test_each_item_lists_its_decisions_without_the_whole_history(store: Store) -> None:
    pid, _ = _pipeline(store)
    one, two = store.add_pipeline_items(pid, [ItemDraft("one"), ItemDraft("two")])
    store.skip_pipeline_items(pid, [two.id], evidence="commit abc, tests pass")
    store.append_pipeline_event(pid, "decision", {"approved": True, "by": "ann"}, item_id=one.id)
    service = PipelineService(store)
    doc = anyio.run(lambda: service.status(pid, ANN, include_history=False))
    assert "history" not in doc
    first, second = doc["items"]
    assert [d["kind"] for d in first["decisions"]] == ["decision"]
    assert [d["kind"] for d in second["decisions"]] == ["items_skipped"]
    assert second["decisions"][0]["data"]["evidence"] == "commit abc, tests pass"
